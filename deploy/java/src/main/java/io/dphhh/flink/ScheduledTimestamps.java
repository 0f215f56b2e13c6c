package io.dphhh.flink;

import java.util.Arrays;

import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * Gives each output record the timestamp it carries in front of its value, so that a Kafka sink
 * writes it as the record's timestamp (docs/ALGORITHMS.md §0.1 g: a report's visible timestamp is
 * its scheduled release time; a dead letter keeps its own record's timestamp).
 *
 * <p>Input: 8 bytes (big-endian signed long, the timestamp; Long.MIN_VALUE: none) then the value.
 * Output: the value, with that timestamp (or none). Stateless; keeps order.
 */
public final class ScheduledTimestamps extends AbstractStreamOperator<byte[]>
        implements OneInputStreamOperator<byte[], byte[]> {

    private static final long serialVersionUID = 1L;

    @Override
    public void processElement(StreamRecord<byte[]> element) throws Exception {
        byte[] in = element.getValue();
        if (in == null || in.length < 8) {
            throw new IllegalStateException("ScheduledTimestamps: Possible corruption: a record without its timestamp");
        }
        long ts = 0;
        for (int i = 0; i < 8; i++) {
            ts = (ts << 8) | (in[i] & 0xffL);
        }
        byte[] value = Arrays.copyOfRange(in, 8, in.length);
        if (ts == Long.MIN_VALUE) {
            output.collect(new StreamRecord<>(value));
        } else {
            output.collect(new StreamRecord<>(value, ts));
        }
    }
}
