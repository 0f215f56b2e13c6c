package io.dphhh.flink;

import java.util.Arrays;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;

/**
 * The live job's watermark: the broker's wall clock, never a function of the data
 * (docs/ALGORITHMS.md §0.1 d, e; stream/clock.py).
 *
 * <p>Record timestamps are the broker's log-append times (the input topic stores LogAppendTime).
 * The job appends a clock record (value {@link #TICK}) to every input partition every few hundred
 * milliseconds. The Kafka source runs one generator per partition and emits the minimum over its
 * partitions; each generator advances its watermark to the timestamp of the newest clock record it
 * has read, and ignores every other record. A partition's log is in append order, so once a clock
 * record appended at time T has been read, every record appended before T has been read too: a
 * window whose scheduled release time is at most T can be released without waiting for, or being
 * triggered by, any element.
 *
 * <p>A live job emits the watermark at every new clock record (a release is not delayed). A replay
 * of such a log ({@code ClockWatermarks(false)}) reads many clock records a second: it emits the
 * newest only at the periodic emission (pipeline.auto-watermark-interval), since every watermark
 * also ends the batcher's current batch.
 */
public final class ClockWatermarks implements WatermarkStrategy<byte[]> {

    private static final long serialVersionUID = 1L;

    private final boolean onEveryTick;

    /** The live job's strategy: a watermark at every new clock record. */
    public ClockWatermarks() {
        this(true);
    }

    /** {@code onEveryTick = false}: the newest clock record's time at the periodic emission only (a replay). */
    public ClockWatermarks(boolean onEveryTick) {
        this.onEveryTick = onEveryTick;
    }

    /** The value of a clock record (also in stream/clock.py). */
    static final byte[] TICK = {(byte) 0xff, 'd', 'p', 'h', 'h', 'h', '-', 'c', 'l', 'o', 'c', 'k', (byte) 0xff};

    /** Whether a record value is a clock record. */
    public static boolean isTick(byte[] value) {
        return value != null && Arrays.equals(value, TICK);
    }

    @Override
    public WatermarkGenerator<byte[]> createWatermarkGenerator(WatermarkGeneratorSupplier.Context context) {
        return new WatermarkGenerator<byte[]>() {
            private long clock = Long.MIN_VALUE;

            @Override
            public void onEvent(byte[] value, long timestamp, WatermarkOutput output) {
                if (isTick(value) && timestamp > clock) {
                    clock = timestamp;
                    if (onEveryTick) {
                        output.emitWatermark(new Watermark(clock));
                    }
                }
            }

            @Override
            public void onPeriodicEmit(WatermarkOutput output) {
                if (clock != Long.MIN_VALUE) {
                    output.emitWatermark(new Watermark(clock));
                }
            }
        };
    }
}
