package io.dphhh.flink;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * Packs consecutive Kafka message values into one record ("batch") before they cross into the
 * Python worker, where a per-record round trip costs far more than decoding a message.
 *
 * <p>Order and timing are preserved exactly: a batch holds messages in arrival order, and the
 * buffer is flushed before every watermark, before every checkpoint barrier and at end of input,
 * so the Python operator sees each message between the same watermarks and on the same side of
 * every checkpoint as it would unbatched. The operator keeps no state (its buffer is always
 * empty at a barrier). A processing-time timer bounds how long a message waits in the buffer.
 *
 * <p>Batch layout (little-endian): magic "DPB1", int32 n, n int64 timestamps (Long.MIN_VALUE when
 * a record has none), n int32 lengths (-1 for a null value), then the n values back to back.
 */
public final class MessageBatcher extends AbstractStreamOperator<byte[]>
        implements OneInputStreamOperator<byte[], byte[]> {

    private static final long serialVersionUID = 1L;
    private static final byte[] MAGIC = {'D', 'P', 'B', '1'};

    private final int maxRecords;
    private final int maxBytes;
    private final long maxDelayMs;
    private final long checkpointDelayMs;

    private transient long[] timestamps;
    private transient int[] lengths;
    private transient ByteArrayOutputStream values;
    private transient int count;
    private transient boolean timerPending;

    public MessageBatcher(int maxRecords, int maxBytes, long maxDelayMs) {
        this(maxRecords, maxBytes, maxDelayMs, 0L);
    }

    /**
     * @param checkpointDelayMs tests only: each checkpoint's synchronous phase waits this long in
     *     this operator, so that a test can act while a checkpoint is in progress (0 = never)
     */
    public MessageBatcher(int maxRecords, int maxBytes, long maxDelayMs, long checkpointDelayMs) {
        if (maxRecords < 1 || maxBytes < 1 || maxDelayMs < 1 || checkpointDelayMs < 0) {
            throw new IllegalArgumentException(
                    "MessageBatcher: maxRecords, maxBytes and maxDelayMs must be >= 1, checkpointDelayMs >= 0");
        }
        this.maxRecords = maxRecords;
        this.maxBytes = maxBytes;
        this.maxDelayMs = maxDelayMs;
        this.checkpointDelayMs = checkpointDelayMs;
    }

    @Override
    public void open() throws Exception {
        super.open();
        timestamps = new long[Math.min(maxRecords, 1024)];
        lengths = new int[timestamps.length];
        values = new ByteArrayOutputStream(Math.min(maxBytes, 1 << 20));
        count = 0;
    }

    @Override
    public void processElement(StreamRecord<byte[]> element) throws Exception {
        byte[] value = element.getValue();
        int size = value == null ? 0 : value.length;
        if (count > 0 && values.size() + size > maxBytes) {
            flush();
        }
        if (count == timestamps.length) {
            int grown = Math.min(maxRecords, timestamps.length * 2);
            timestamps = Arrays.copyOf(timestamps, grown);
            lengths = Arrays.copyOf(lengths, grown);
        }
        timestamps[count] = element.hasTimestamp() ? element.getTimestamp() : Long.MIN_VALUE;
        lengths[count] = value == null ? -1 : size;
        if (value != null) {
            values.write(value, 0, size);
        }
        count++;
        if (count >= maxRecords || values.size() >= maxBytes) {
            flush();
        } else if (!timerPending) {
            timerPending = true;
            long at = getProcessingTimeService().getCurrentProcessingTime() + maxDelayMs;
            getProcessingTimeService().registerTimer(at, time -> {
                timerPending = false;
                flush();
            });
        }
    }

    @Override
    public void processWatermark(Watermark mark) throws Exception {
        flush();
        super.processWatermark(mark);
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        flush();
        super.prepareSnapshotPreBarrier(checkpointId);
    }

    @Override
    public void snapshotState(StateSnapshotContext context) throws Exception {
        super.snapshotState(context);
        if (checkpointDelayMs > 0) {
            Thread.sleep(checkpointDelayMs);
        }
    }

    @Override
    public void finish() throws Exception {
        flush();
        super.finish();
    }

    private void flush() {
        if (count == 0) {
            return;
        }
        ByteBuffer out = ByteBuffer.allocate(8 + 12 * count + values.size()).order(ByteOrder.LITTLE_ENDIAN);
        out.put(MAGIC).putInt(count);
        long last = Long.MIN_VALUE;
        for (int i = 0; i < count; i++) {
            out.putLong(timestamps[i]);
            last = Math.max(last, timestamps[i]);
        }
        for (int i = 0; i < count; i++) {
            out.putInt(lengths[i]);
        }
        out.put(values.toByteArray());
        count = 0;
        values.reset();
        if (last == Long.MIN_VALUE) {
            output.collect(new StreamRecord<>(out.array()));
        } else {
            output.collect(new StreamRecord<>(out.array(), last));
        }
    }
}
