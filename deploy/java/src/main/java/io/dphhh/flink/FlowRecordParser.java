package io.dphhh.flink;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.PrintStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Reads the usual shape of a flow-JSON record (connectors/flow_json.py) in the JVM: its addresses,
 * weight and event time, so that the Python worker receives columns instead of JSON text.
 *
 * <p>The contract is one-sided. {@link #parse} accepts a record only when it is certain that
 * Python's {@code FlowJsonDecoder} (family ipv4) decodes it, and then returns exactly the values
 * Python would: the record is strict JSON (RFC 8259) of at most {@code maxRecordBytes} bytes, a
 * top-level object, ASCII only, without escape sequences, nesting at most 32 deep, no number
 * longer than 40 characters; the key address(es) are strict dotted quads; {@code packets} and
 * {@code bytes} are JSON integers with 0 <= packets <= bytes <= maxCounter; the weight is not 0;
 * the time chain ends at a valid time or at no time at all. Everything else — a bad record, an
 * IPv6 address, an escape, a time format Python reads but this does not — is refused here and
 * decoded by Python from its bytes, which gives its reason. Accepting less never changes a result;
 * accepting more would, so the parity test (tests/stream/test_flow_record_parser.py) compares the
 * two decoders on generated and hand-written records.
 *
 * <p>Field semantics mirror Python's: for duplicate keys the last one counts; a null or absent
 * primary name falls back to its alternative (goflow2 v1's CamelCase); the event time is the
 * first time field that is present, not null and not one of pmacct's zero times. Pure Java, no
 * Flink dependency (also run as a command by the parity test: see {@link #main}).
 */
public final class FlowRecordParser implements Serializable {

    private static final long serialVersionUID = 1L;

    /** Which addresses a record must hold: the source, the destination, or both. */
    public static final int SOURCE = 0;
    public static final int DESTINATION = 1;
    public static final int PAIR = 2;

    /** What a record weighs. */
    public static final int PACKETS = 0;
    public static final int BYTES = 1;
    public static final int RECORDS = 2;

    /** The last millisecond of year 9999 (Python's _MAX_MS). */
    public static final long MAX_MS = 253402300799999L;

    private static final int MAX_DEPTH = 32;
    private static final int MAX_NUMBER_CHARS = 40;
    private static final byte ABSENT = 0;
    private static final byte NULL = 1;
    private static final byte STRING = 2;
    private static final byte INT = 3;
    private static final byte OTHER = 4;
    // fixed slots; the time fields follow from TIME0 on
    private static final int SRC = 0;
    private static final int SRC_ALT = 1;
    private static final int DST = 2;
    private static final int DST_ALT = 3;
    private static final int PK = 4;
    private static final int PK_ALT = 5;
    private static final int BY = 6;
    private static final int BY_ALT = 7;
    private static final int TIME0 = 8;
    private static final byte[][] ZERO_TIMES = {
        ascii("0"),
        ascii("0.000000"),
        ascii("0000-00-00 00:00:00.000000"),
        ascii("0000-00-00 00:00:00"),
        ascii("0000-00-00T00:00:00.000000Z"),
        ascii("0000-00-00T00:00:00Z"),
        ascii("0000-00-00T00:00:00.000000"),
    };
    private static final int[] DAYS_IN_MONTH = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    /** Bytes a string may hold as they are: printable ASCII but the quote and the backslash. */
    private static final boolean[] PLAIN = new boolean[256];

    static {
        for (int c = 0x20; c < 0x80; c++) {
            PLAIN[c] = c != '"' && c != '\\';
        }
    }

    private final boolean goflow2;
    private final int addresses;
    private final int weight;
    private final long maxCounter;
    private final int maxRecordBytes;
    private final byte[][] names;
    private final int[][] slotsByLength; // the slots whose name has that many bytes

    private transient byte[] kind;
    private transient int[] from;
    private transient int[] to;
    private transient long[] number;
    private transient byte[] data;
    private transient int end;
    private transient byte pendingKind;
    private transient long pendingNumber;
    private transient int pendingFrom;
    private transient int pendingTo;
    private transient boolean closed;

    /**
     * @param schema "pmacct" or "goflow2"
     * @param addresses {@link #SOURCE}, {@link #DESTINATION} or {@link #PAIR}
     * @param weight {@link #PACKETS}, {@link #BYTES} or {@link #RECORDS}
     * @param maxCounter the largest packets/bytes value accepted (Python's max_counter)
     * @param maxRecordBytes the largest record accepted (Python's max_record_bytes)
     * @param timeFields the event-time fields, in order (Python's time_fields)
     */
    public FlowRecordParser(
            String schema, int addresses, int weight, long maxCounter, int maxRecordBytes, String[] timeFields) {
        if (!"pmacct".equals(schema) && !"goflow2".equals(schema)) {
            throw new IllegalArgumentException("FlowRecordParser: schema must be pmacct or goflow2");
        }
        if (addresses < SOURCE || addresses > PAIR || weight < PACKETS || weight > RECORDS) {
            throw new IllegalArgumentException("FlowRecordParser: addresses and weight out of range");
        }
        if (maxCounter < 1 || maxRecordBytes < 1 || timeFields == null || timeFields.length == 0) {
            throw new IllegalArgumentException("FlowRecordParser: maxCounter, maxRecordBytes and timeFields");
        }
        this.goflow2 = "goflow2".equals(schema);
        this.addresses = addresses;
        this.weight = weight;
        this.maxCounter = maxCounter;
        this.maxRecordBytes = maxRecordBytes;
        this.names = new byte[TIME0 + timeFields.length][];
        if (goflow2) {
            set(SRC, "src_addr", SRC_ALT, "SrcAddr");
            set(DST, "dst_addr", DST_ALT, "DstAddr");
            set(PK, "packets", PK_ALT, "Packets");
            set(BY, "bytes", BY_ALT, "Bytes");
        } else {
            set(SRC, "ip_src", SRC_ALT, null);
            set(DST, "ip_dst", DST_ALT, null);
            set(PK, "packets", PK_ALT, null);
            set(BY, "bytes", BY_ALT, null);
        }
        for (int i = 0; i < timeFields.length; i++) {
            names[TIME0 + i] = ascii(timeFields[i]);
        }
        int longest = 0;
        for (byte[] name : names) {
            longest = name == null ? longest : Math.max(longest, name.length);
        }
        slotsByLength = new int[longest + 1][];
        for (int length = 0; length <= longest; length++) {
            int k = 0;
            for (byte[] name : names) {
                k += name != null && name.length == length ? 1 : 0;
            }
            slotsByLength[length] = new int[k];
            k = 0;
            for (int slot = 0; slot < names.length; slot++) {
                if (names[slot] != null && names[slot].length == length) {
                    slotsByLength[length][k++] = slot;
                }
            }
        }
    }

    private void set(int slot, String name, int altSlot, String alt) {
        names[slot] = ascii(name);
        names[altSlot] = alt == null ? null : ascii(alt);
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Reads {@code value[offset, offset + length)}; on success stores source address, destination
     * address (0 when not read), weight and event time (epoch ms, -1 = the record holds none) in
     * {@code out[0..3]} and returns true; returns false for every record it leaves to Python.
     */
    public boolean parse(byte[] value, int offset, int length, long[] out) {
        if (value == null || length < 2 || length > maxRecordBytes) {
            return false;
        }
        if (kind == null) {
            kind = new byte[names.length];
            from = new int[names.length];
            to = new int[names.length];
            number = new long[names.length];
        }
        Arrays.fill(kind, ABSENT);
        data = value;
        end = offset + length;
        int i = skipWhitespace(offset);
        if (i >= end || data[i] != '{') {
            return false;
        }
        i = container(i, 1);
        if (i < 0 || skipWhitespace(i) != end) {
            return false;
        }
        long src = 0;
        long dst = 0;
        if (addresses != DESTINATION) {
            int s = resolve(SRC, SRC_ALT);
            if (s < 0 || kind[s] != STRING || (src = ipv4(from[s], to[s])) < 0) {
                return false;
            }
        }
        if (addresses != SOURCE) {
            int s = resolve(DST, DST_ALT);
            if (s < 0 || kind[s] != STRING || (dst = ipv4(from[s], to[s])) < 0) {
                return false;
            }
        }
        int p = resolve(PK, PK_ALT);
        int b = resolve(BY, BY_ALT);
        if (p < 0 || b < 0 || kind[p] != INT || kind[b] != INT) {
            return false;
        }
        long packets = number[p];
        long bytes = number[b];
        if (packets > bytes || bytes > maxCounter) {
            return false;
        }
        long w = weight == PACKETS ? packets : weight == BYTES ? bytes : 1;
        if (w == 0) {
            return false;
        }
        long ms = -1;
        for (int t = TIME0; t < names.length; t++) {
            byte k = kind[t];
            if (k == ABSENT || k == NULL) {
                continue;
            }
            if (k == INT) {
                if (number[t] == 0) {
                    continue;
                }
                ms = goflow2 ? number[t] / 1_000_000L : number[t] <= MAX_MS / 1000 ? number[t] * 1000 : -1;
            } else if (k == STRING && !goflow2) {
                if (isZeroTime(from[t], to[t])) {
                    continue;
                }
                ms = timeText(from[t], to[t]);
            }
            if (ms <= 0) {
                return false;
            }
            break;
        }
        out[0] = src;
        out[1] = dst;
        out[2] = w;
        out[3] = ms;
        return true;
    }

    /** The slot Python reads: the primary unless absent or null, else the alternative (or -1). */
    private int resolve(int primary, int alt) {
        if (kind[primary] != ABSENT && kind[primary] != NULL) {
            return primary;
        }
        if (names[alt] != null && kind[alt] != ABSENT && kind[alt] != NULL) {
            return alt;
        }
        return -1;
    }

    // ------------------------------------------------------------------------------------------
    // strict JSON; each returns the position after what it read, or -1

    private int skipWhitespace(int i) {
        while (i < end) {
            byte c = data[i];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                break;
            }
            i++;
        }
        return i;
    }

    /** An object or an array (by its first byte) at {@code i}; the top level's members are recorded. */
    private int container(int i, int depth) {
        boolean isObject = data[i] == '{';
        byte close = (byte) (isObject ? '}' : ']');
        if (depth > MAX_DEPTH) {
            return -1;
        }
        i = skipWhitespace(i + 1);
        if (i < end && data[i] == close) {
            return i + 1;
        }
        while (true) {
            int keyFrom = 0;
            int keyTo = 0;
            if (isObject) {
                if (i >= end || data[i] != '"') {
                    return -1;
                }
                keyFrom = i + 1;
                i = string(i);
                if (i < 0) {
                    return -1;
                }
                keyTo = i - 1;
                i = skipWhitespace(i);
                if (i >= end || data[i] != ':') {
                    return -1;
                }
                i = skipWhitespace(i + 1);
            }
            i = value(i, depth);
            if (i < 0) {
                return -1;
            }
            if (isObject && depth == 1) {
                record(keyFrom, keyTo);
            }
            i = next(i, close);
            if (i < 0 || closed) {
                return i;
            }
        }
    }

    /**
     * After a member or element: the position after {@code close} (and {@link #closed} set) when
     * the container ends there, else the position of the next one after a comma, or -1.
     */
    private int next(int i, byte close) {
        i = skipWhitespace(i);
        closed = i < end && data[i] == close;
        if (closed) {
            return i + 1;
        }
        return i < end && data[i] == ',' ? skipWhitespace(i + 1) : -1;
    }

    /** A value at {@code i}; its kind (and number or text span) is left in the pending fields. */
    private int value(int i, int depth) {
        if (i >= end) {
            return -1;
        }
        byte c = data[i];
        pendingKind = OTHER;
        if (c == '"') {
            int after = string(i);
            pendingKind = STRING;
            pendingFrom = i + 1;
            pendingTo = after - 1;
            return after;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            return number(i);
        }
        if (c == '{' || c == '[') {
            int after = container(i, depth + 1);
            pendingKind = OTHER; // not what its last member left
            return after;
        }
        if (literal(i, "true") || literal(i, "false")) {
            return i + (c == 't' ? 4 : 5);
        }
        if (literal(i, "null")) {
            pendingKind = NULL;
            return i + 4;
        }
        return -1;
    }

    private boolean literal(int i, String word) {
        if (end - i < word.length()) {
            return false;
        }
        for (int k = 0; k < word.length(); k++) {
            if (data[i + k] != word.charAt(k)) {
                return false;
            }
        }
        return true;
    }

    /** A string without escapes, control or non-ASCII characters; returns the position after its quote. */
    private int string(int i) {
        int j = i + 1;
        while (j < end && PLAIN[data[j] & 0xff]) {
            j++;
        }
        return j < end && data[j] == '"' ? j + 1 : -1;
    }

    private int number(int i) {
        int start = i;
        boolean plainInteger = true;
        if (data[i] == '-') {
            plainInteger = false;
            i++;
        }
        if (i >= end) {
            return -1;
        }
        if (data[i] == '0') {
            i++;
        } else if (data[i] >= '1' && data[i] <= '9') {
            while (i < end && data[i] >= '0' && data[i] <= '9') {
                i++;
            }
        } else {
            return -1;
        }
        int intEnd = i;
        if (i < end && data[i] == '.') {
            plainInteger = false;
            i++;
            int digits = i;
            while (i < end && data[i] >= '0' && data[i] <= '9') {
                i++;
            }
            if (i == digits) {
                return -1;
            }
        }
        if (i < end && (data[i] == 'e' || data[i] == 'E')) {
            plainInteger = false;
            i++;
            if (i < end && (data[i] == '+' || data[i] == '-')) {
                i++;
            }
            int digits = i;
            while (i < end && data[i] >= '0' && data[i] <= '9') {
                i++;
            }
            if (i == digits) {
                return -1;
            }
        }
        if (i - start > MAX_NUMBER_CHARS) {
            return -1;
        }
        if (plainInteger && intEnd - start <= 19) {
            long v = 0;
            boolean fits = true;
            for (int k = start; k < intEnd; k++) {
                int d = data[k] - '0';
                if (v > (Long.MAX_VALUE - d) / 10) {
                    fits = false;
                    break;
                }
                v = v * 10 + d;
            }
            if (fits) {
                pendingKind = INT;
                pendingNumber = v;
            }
        }
        return i;
    }

    /** Stores the value just read under every slot whose name is the key {@code data[keyFrom, keyTo)}. */
    private void record(int keyFrom, int keyTo) {
        int n = keyTo - keyFrom;
        if (n >= slotsByLength.length) {
            return;
        }
        for (int s : slotsByLength[n]) {
            byte[] name = names[s];
            int k = 0;
            while (k < n && data[keyFrom + k] == name[k]) {
                k++;
            }
            if (k == n) {
                kind[s] = pendingKind;
                number[s] = pendingNumber;
                from[s] = pendingFrom;
                to[s] = pendingTo;
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // addresses and times

    /** A strict dotted quad (no leading zeros, four octets 0..255) as 0..2^32-1, or -1. */
    private long ipv4(int i, int j) {
        if (j - i < 7 || j - i > 15) {
            return -1;
        }
        long acc = 0;
        int octets = 0;
        int value = 0;
        int digits = 0;
        boolean leadingZero = false;
        for (int k = i; k <= j; k++) {
            byte c = k < j ? data[k] : (byte) '.';
            if (c >= '0' && c <= '9') {
                if (leadingZero || digits == 3) {
                    return -1;
                }
                leadingZero = digits == 0 && c == '0';
                value = value * 10 + (c - '0');
                digits++;
            } else if (c == '.') {
                if (digits == 0 || value > 255) {
                    return -1;
                }
                acc = (acc << 8) | value;
                octets++;
                value = 0;
                digits = 0;
                leadingZero = false;
            } else {
                return -1;
            }
        }
        return octets == 4 ? acc : -1;
    }

    private boolean isZeroTime(int i, int j) {
        if (data[i] != '0') { // every zero time starts with one
            return false;
        }
        for (byte[] zero : ZERO_TIMES) {
            if (zero.length == j - i && Arrays.equals(data, i, j, zero, 0, zero.length)) {
                return true;
            }
        }
        return false;
    }

    /** pmacct's time texts (connectors/flow_json.py): epoch ms, or -1 for anything not read. */
    private long timeText(int i, int j) {
        if (j - i > 4 && data[i + 4] == '-') {
            return isoTime(i, j - i);
        }
        // epoch seconds: [0-9]{1,12} then optionally '.' and [0-9]{1,9}
        int k = i;
        long seconds = 0;
        while (k < j && data[k] >= '0' && data[k] <= '9') {
            seconds = seconds * 10 + (data[k] - '0');
            k++;
            if (k - i > 12) {
                return -1;
            }
        }
        if (k == i) {
            return -1;
        }
        long millis = 0;
        if (k < j) {
            if (data[k] != '.') {
                return -1;
            }
            int digits = 0;
            for (k++; k < j; k++) {
                if (data[k] < '0' || data[k] > '9' || ++digits > 9) {
                    return -1;
                }
                if (digits <= 3) {
                    millis = millis * 10 + (data[k] - '0');
                }
            }
            if (digits == 0) {
                return -1;
            }
            for (int d = Math.min(digits, 3); d < 3; d++) {
                millis *= 10;
            }
        }
        long value = seconds * 1000 + millis;
        return value > 0 && value <= MAX_MS ? value : -1;
    }

    private int digit(int at) {
        byte c = data[at];
        return c >= '0' && c <= '9' ? c - '0' : -1;
    }

    private int number2(int at) {
        int a = digit(at);
        int b = digit(at + 1);
        return a < 0 || b < 0 ? -1 : a * 10 + b;
    }

    /** "YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM]" (a zone-less time is UTC). */
    private long isoTime(int i, int length) {
        if (length < 19 || length > 35) {
            return -1;
        }
        int y1 = number2(i);
        int y2 = number2(i + 2);
        int month = number2(i + 5);
        int day = number2(i + 8);
        int hour = number2(i + 11);
        int minute = number2(i + 14);
        int second = number2(i + 17);
        if (y1 < 0 || y2 < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) {
            return -1;
        }
        byte t = data[i + 10];
        if (data[i + 4] != '-' || data[i + 7] != '-' || (t != ' ' && t != 'T') || data[i + 13] != ':'
                || data[i + 16] != ':') {
            return -1;
        }
        int year = y1 * 100 + y2;
        int pos = 19;
        long fraction = 0;
        if (length > 19 && data[i + 19] == '.') {
            int digits = 0;
            pos = 20;
            while (pos < length && digits < 9 && digit(i + pos) >= 0) {
                if (digits < 3) {
                    fraction = fraction * 10 + digit(i + pos);
                }
                digits++;
                pos++;
            }
            if (digits == 0) {
                return -1;
            }
            for (int d = Math.min(digits, 3); d < 3; d++) {
                fraction *= 10;
            }
        }
        int rest = length - pos;
        long offsetMinutes = 0;
        if (rest == 1 && data[i + pos] == 'Z') {
            // UTC
        } else if (rest == 6 && (data[i + pos] == '+' || data[i + pos] == '-')) {
            int oh = number2(i + pos + 1);
            int om = number2(i + pos + 4);
            if (oh < 0 || om < 0 || data[i + pos + 3] != ':' || oh > 23 || om > 59) {
                return -1;
            }
            offsetMinutes = (data[i + pos] == '-' ? -1 : 1) * (oh * 60L + om);
        } else if (rest != 0) {
            return -1;
        }
        boolean leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        if (year < 1 || month < 1 || month > 12 || day < 1) {
            return -1;
        }
        int dim = DAYS_IN_MONTH[month - 1] + (month == 2 && leap ? 1 : 0);
        if (day > dim || hour > 23 || minute > 59 || second > 59) {
            return -1;
        }
        // days since 1970-01-01 (H. Hinnant's days_from_civil)
        long y = year - (month <= 2 ? 1 : 0);
        long era = Math.floorDiv(y, 400);
        long yoe = y - era * 400;
        long doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
        long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        long days = era * 146097 + doe - 719468;
        long out = (days * 86400 + hour * 3600L + minute * 60L + second - offsetMinutes * 60) * 1000 + fraction;
        return out > 0 && out <= MAX_MS ? out : -1;
    }

    // ------------------------------------------------------------------------------------------

    /**
     * The parity test's entry point: {@code schema maxCounter maxRecordBytes timeField...}; reads
     * records from standard input (each an int32 big-endian length, -1 for null, then the bytes)
     * and prints one line per record: for each of the nine parsers (addresses SOURCE, DESTINATION,
     * PAIR, each weighted by PACKETS, BYTES, RECORDS, in that order) "-" when it leaves the record
     * to Python, else "SRC,DST,WEIGHT,MS"; separated by spaces.
     */
    public static void main(String[] args) throws IOException {
        String[] times = Arrays.copyOfRange(args, 3, args.length);
        FlowRecordParser[] parsers = new FlowRecordParser[9];
        for (int a = SOURCE; a <= PAIR; a++) {
            for (int w = PACKETS; w <= RECORDS; w++) {
                parsers[a * 3 + w] = new FlowRecordParser(
                        args[0], a, w, Long.parseLong(args[1]), Integer.parseInt(args[2]), times);
            }
        }
        DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(System.in, 1 << 16));
        PrintStream out = new PrintStream(new java.io.BufferedOutputStream(System.out, 1 << 16), false, "US-ASCII");
        long[] cols = new long[4];
        StringBuilder line = new StringBuilder();
        while (true) {
            int n;
            try {
                n = in.readInt();
            } catch (EOFException e) {
                break;
            }
            byte[] value = null;
            if (n >= 0) {
                value = new byte[n];
                in.readFully(value);
            }
            line.setLength(0);
            for (FlowRecordParser parser : parsers) {
                if (line.length() > 0) {
                    line.append(' ');
                }
                if (parser.parse(value, 0, n < 0 ? 0 : n, cols)) {
                    line.append(cols[0]).append(',').append(cols[1]).append(',').append(cols[2]).append(',')
                            .append(cols[3]);
                } else {
                    line.append('-');
                }
            }
            out.println(line);
        }
        out.flush();
    }
}
