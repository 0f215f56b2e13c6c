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
 *
 * <p>With a {@link FlowRecordParser} (flow-json input), each message the parser reads also goes
 * into columns, and the layout is "DPB2": the same header, timestamps and lengths, then int32 k,
 * k uint32 source addresses, k uint32 destination addresses, k int64 weights, k int64 event times,
 * n uint8 flags (1 = parsed; k of them), then every value (stream/message_batch.py reads both).
 */
public final class MessageBatcher extends AbstractStreamOperator<byte[]>
        implements OneInputStreamOperator<byte[], byte[]> {

    private static final long serialVersionUID = 1L;
    private static final byte[] MAGIC = {'D', 'P', 'B', '1'};
    private static final byte[] MAGIC_FLOWS = {'D', 'P', 'B', '2'};

    private final int maxRecords;
    private final int maxBytes;
    private final long maxDelayMs;
    private final long checkpointDelayMs;
    private final FlowRecordParser parser;

    private transient long[] timestamps;
    private transient int[] lengths;
    private transient Buffer values;
    private transient int count;
    private transient boolean timerPending;
    private transient byte[] parsed;
    private transient int[] sources;
    private transient int[] destinations;
    private transient long[] weights;
    private transient long[] eventMs;
    private transient int parsedCount;
    private transient long[] columns;

    public MessageBatcher(int maxRecords, int maxBytes, long maxDelayMs) {
        this(maxRecords, maxBytes, maxDelayMs, 0L);
    }

    /**
     * @param checkpointDelayMs tests only: each checkpoint's synchronous phase waits this long in
     *     this operator, so that a test can act while a checkpoint is in progress (0 = never)
     */
    public MessageBatcher(int maxRecords, int maxBytes, long maxDelayMs, long checkpointDelayMs) {
        this(maxRecords, maxBytes, maxDelayMs, checkpointDelayMs, null);
    }

    /** @param parser reads flow records into columns (DPB2 batches); null for DPB1 batches */
    public MessageBatcher(
            int maxRecords, int maxBytes, long maxDelayMs, long checkpointDelayMs, FlowRecordParser parser) {
        if (maxRecords < 1 || maxBytes < 1 || maxDelayMs < 1 || checkpointDelayMs < 0) {
            throw new IllegalArgumentException(
                    "MessageBatcher: maxRecords, maxBytes and maxDelayMs must be >= 1, checkpointDelayMs >= 0");
        }
        this.maxRecords = maxRecords;
        this.maxBytes = maxBytes;
        this.maxDelayMs = maxDelayMs;
        this.checkpointDelayMs = checkpointDelayMs;
        this.parser = parser;
    }

    @Override
    public void open() throws Exception {
        super.open();
        timestamps = new long[Math.min(maxRecords, 1024)];
        lengths = new int[timestamps.length];
        values = new Buffer(Math.min(maxBytes, 1 << 20));
        count = 0;
        if (parser != null) {
            parsed = new byte[timestamps.length];
            sources = new int[timestamps.length];
            destinations = new int[timestamps.length];
            weights = new long[timestamps.length];
            eventMs = new long[timestamps.length];
            columns = new long[4];
            parsedCount = 0;
        }
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
            if (parser != null) {
                parsed = Arrays.copyOf(parsed, grown);
                sources = Arrays.copyOf(sources, grown);
                destinations = Arrays.copyOf(destinations, grown);
                weights = Arrays.copyOf(weights, grown);
                eventMs = Arrays.copyOf(eventMs, grown);
            }
        }
        timestamps[count] = element.hasTimestamp() ? element.getTimestamp() : Long.MIN_VALUE;
        lengths[count] = value == null ? -1 : size;
        if (value != null) {
            values.write(value, 0, size);
        }
        if (parser != null) {
            boolean read = parser.parse(value, 0, size, columns);
            parsed[count] = (byte) (read ? 1 : 0);
            if (read) {
                sources[parsedCount] = (int) columns[0];
                destinations[parsedCount] = (int) columns[1];
                weights[parsedCount] = columns[2];
                eventMs[parsedCount] = columns[3];
                parsedCount++;
            }
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
        int columnBytes = parser == null ? 0 : 4 + 24 * parsedCount + count;
        ByteBuffer out = ByteBuffer.allocate(8 + 12 * count + columnBytes + values.size())
                .order(ByteOrder.LITTLE_ENDIAN);
        out.put(parser == null ? MAGIC : MAGIC_FLOWS).putInt(count);
        long last = Long.MIN_VALUE;
        for (int i = 0; i < count; i++) {
            out.putLong(timestamps[i]);
            last = Math.max(last, timestamps[i]);
        }
        for (int i = 0; i < count; i++) {
            out.putInt(lengths[i]);
        }
        if (parser != null) {
            out.putInt(parsedCount);
            for (int i = 0; i < parsedCount; i++) {
                out.putInt(sources[i]);
            }
            for (int i = 0; i < parsedCount; i++) {
                out.putInt(destinations[i]);
            }
            for (int i = 0; i < parsedCount; i++) {
                out.putLong(weights[i]);
            }
            for (int i = 0; i < parsedCount; i++) {
                out.putLong(eventMs[i]);
            }
            out.put(parsed, 0, count);
            parsedCount = 0;
        }
        out.put(values.bytes(), 0, values.size());
        count = 0;
        values.reset();
        if (last == Long.MIN_VALUE) {
            output.collect(new StreamRecord<>(out.array()));
        } else {
            output.collect(new StreamRecord<>(out.array(), last));
        }
    }

    /** A byte buffer whose array is read in place (no copy per flush). */
    private static final class Buffer extends ByteArrayOutputStream {
        Buffer(int size) {
            super(size);
        }

        byte[] bytes() {
            return buf;
        }
    }
}
