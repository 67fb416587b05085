// The official RocketMQ 5 Java client (org.apache.rocketmq:rocketmq-client-java, gRPC) as a
// test driver for tests/interop: clients5.py starts it for test_rmq5_clients.py and
// test_java5_client.py.
//
// Launched as a single-file program on the jars tests/interop/java5/pom.xml resolves:
//   java -cp 'tests/interop/java5/target/lib/*' Java5Client.java run
// It reads one JSON line of arguments on stdin,
//   {"endpoint": "127.0.0.1:PORT", "ssl": false, "deadline_s": 60, "steps": [...]}
// ("ssl": true calls enableSsl(true), false enableSsl(false), absent leaves the client's
// default, which is SSL on) and prints JSON lines on stdout: "started" (with the client's
// version), "configured" (whether SSL is on), then what each step did, and last "done" ("error" in it when a step threw what it
// does not report itself, or when deadline_s passed: the program then exits at once).
// `java ... Java5Client.java version` prints the client version and exits.
//
// Steps, by "op", run in order on the clients earlier steps made; each may have a "label" that
// every line it prints carries (its index and op by default). A message spec has "body", "tag",
// "keys" (a list), "properties", "group" (FIFO message group), "delay_ms" (delivery timestamp
// that many ms from now).
//  - producer: "topics", "checker" (COMMIT / ROLLBACK / UNKNOWN, or {"default": ..., "bodies":
//    {body: answer}}): a Producer; each transaction check is a "checked" line.
//  - send: "topic", "messages" -> per message "sent" (message_id, offset, deliver_at_ms) or
//    "send_error" (type, code, text).
//  - transaction: "topic", "message", "end" (commit / rollback / none) -> "sent" (with the
//    transaction id), then "ended" or "end_error".
//  - wait_checks: "count", "within_s" -> "checks".
//  - simple: "group", "topic", "expression", "expression_type" (TAG / SQL92), "await_s": a
//    SimpleConsumer (push takes the same expression fields).
//  - receive: "max", "invisible_s", "until", "until_total", "within_s", "ack" -> "msg" per
//    message ("index": its place among all received), then "received". Receives at least once.
//  - ack: "indices" (or "all") -> "acked" or "ack_error" per message.
//  - change: "index", "invisible_s" -> "changed" (old and new receipt handle) or "change_error".
//  - sleep: "s".
//  - push: "group", "topic", "expression", "fail_prefix", "until_ok", "until_failed",
//    "settle_s", "within_s" -> "msg" per delivery (with "result"), then "pushed". The push
//    consumer is closed at the end of the step.
// The client logs under ~/logs/rocketmq: run it with user.home in a temp dir.

import java.io.BufferedReader;
import java.io.Closeable;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.ProducerBuilder;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;
import org.apache.rocketmq.client.java.message.MessageViewImpl;
import org.apache.rocketmq.client.java.misc.MetadataUtils;

public class Java5Client {
    private static final Object OUT = new Object();
    private static volatile String label = "";

    // ------------------------------------------------------------------ JSON, both ways

    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            Json p = new Json(text);
            Object value = p.value();
            p.space();
            if (p.i != p.s.length()) {
                throw new IllegalArgumentException("trailing characters at " + p.i);
            }
            return value;
        }

        private void space() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private Object value() {
            space();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> map = new LinkedHashMap<>();
                i++;
                space();
                if (s.charAt(i) == '}') {
                    i++;
                    return map;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    map.put(key, value());
                    space();
                    if (s.charAt(i) == ',') {
                        i++;
                        continue;
                    }
                    expect('}');
                    return map;
                }
            }
            if (c == '[') {
                List<Object> list = new ArrayList<>();
                i++;
                space();
                if (s.charAt(i) == ']') {
                    i++;
                    return list;
                }
                while (true) {
                    list.add(value());
                    space();
                    if (s.charAt(i) == ',') {
                        i++;
                        continue;
                    }
                    expect(']');
                    return list;
                }
            }
            if (c == '"') {
                return string();
            }
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String number = s.substring(start, i);
            if (number.isEmpty()) {
                throw new IllegalArgumentException("unexpected " + c + " at " + start);
            }
            if (number.contains(".") || number.contains("e") || number.contains("E")) {
                return Double.parseDouble(number);
            }
            return Long.parseLong(number);
        }

        private void expect(char c) {
            if (s.charAt(i) != c) {
                throw new IllegalArgumentException("expected " + c + " at " + i);
            }
            i++;
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': out.append('\n'); break;
                    case 't': out.append('\t'); break;
                    case 'r': out.append('\r'); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'u':
                        out.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default: out.append(e);
                }
            }
        }

        static String write(Object value) {
            StringBuilder out = new StringBuilder();
            write(out, value);
            return out.toString();
        }

        private static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof String) {
                quote(out, (String) value);
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else if (value instanceof Map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    quote(out, String.valueOf(e.getKey()));
                    out.append(':');
                    write(out, e.getValue());
                }
                out.append('}');
            } else if (value instanceof Iterable) {
                out.append('[');
                boolean first = true;
                for (Object item : (Iterable<?>) value) {
                    if (!first) {
                        out.append(',');
                    }
                    first = false;
                    write(out, item);
                }
                out.append(']');
            } else {
                quote(out, String.valueOf(value));
            }
        }

        private static void quote(StringBuilder out, String text) {
            out.append('"');
            for (int k = 0; k < text.length(); k++) {
                char c = text.charAt(k);
                if (c == '"' || c == '\\') {
                    out.append('\\').append(c);
                } else if (c < 0x20 || c == 0x7f) {
                    out.append(String.format("\\u%04x", (int) c));
                } else {
                    out.append(c);
                }
            }
            out.append('"');
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> obj(Object value) {
        return value == null ? Collections.emptyMap() : (Map<String, Object>) value;
    }

    @SuppressWarnings("unchecked")
    static List<Object> list(Object value) {
        return value == null ? Collections.emptyList() : (List<Object>) value;
    }

    static String str(Map<String, Object> m, String key, String otherwise) {
        Object v = m.get(key);
        return v == null ? otherwise : String.valueOf(v);
    }

    static long num(Map<String, Object> m, String key, long otherwise) {
        Object v = m.get(key);
        return v == null ? otherwise : ((Number) v).longValue();
    }

    static double real(Map<String, Object> m, String key, double otherwise) {
        Object v = m.get(key);
        return v == null ? otherwise : ((Number) v).doubleValue();
    }

    static boolean flag(Map<String, Object> m, String key) {
        return Boolean.TRUE.equals(m.get(key));
    }

    // ------------------------------------------------------------------ output

    static Map<String, Object> fields(Object... pairs) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int k = 0; k < pairs.length; k += 2) {
            map.put((String) pairs[k], pairs[k + 1]);
        }
        return map;
    }

    static void emit(String event, Map<String, Object> more) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", event);
        line.put("label", label);
        line.putAll(more);
        String text = Json.write(line);
        synchronized (OUT) {
            System.out.println(text);
            System.out.flush();
        }
    }

    static void emit(String event, Object... pairs) {
        emit(event, fields(pairs));
    }

    private static final Pattern CODE = Pattern.compile("response-code=(\\d+)");

    static Map<String, Object> errorFields(Throwable exc) {
        Throwable t = exc;
        while (t.getCause() != null && !(t instanceof org.apache.rocketmq.client.apis.ClientException)) {
            t = t.getCause();
        }
        String text = String.valueOf(t.getMessage());
        Matcher m = CODE.matcher(text);
        Long code = m.find() ? Long.parseLong(m.group(1)) : null;
        return fields("type", t.getClass().getSimpleName(), "code", code, "text", text);
    }

    static Map<String, Object> describe(MessageView msg, int index) {
        ByteBuffer buf = msg.getBody().duplicate();
        byte[] body = new byte[buf.remaining()];
        buf.get(body);
        List<String> keys = new ArrayList<>(msg.getKeys());
        Collections.sort(keys);
        Map<String, Object> info = fields(
                "index", index,
                "topic", msg.getTopic(),
                "body", new String(body, StandardCharsets.UTF_8),
                "tag", msg.getTag().orElse(null),
                "keys", keys,
                "properties", new TreeMap<>(msg.getProperties()),
                "message_id", msg.getMessageId().toString(),
                "message_group", msg.getMessageGroup().orElse(null),
                "delivery_attempt", msg.getDeliveryAttempt(),
                "delivery_timestamp", msg.getDeliveryTimestamp().orElse(null),
                "born_timestamp", msg.getBornTimestamp(),
                "born_host", msg.getBornHost());
        if (msg instanceof MessageViewImpl) {
            MessageViewImpl impl = (MessageViewImpl) msg;
            info.put("corrupted", impl.isCorrupted());
            info.put("receipt_handle", impl.getReceiptHandle());
            info.put("offset", impl.getOffset());
            info.put("queue_id", impl.getMessageQueue() == null ? null : impl.getMessageQueue().getQueueId());
        }
        info.put("at_ms", System.currentTimeMillis());
        return info;
    }

    // ------------------------------------------------------------------ the steps

    static final class Session {
        final ClientServiceProvider provider = ClientServiceProvider.loadService();
        final ClientConfiguration config;
        Producer producer;
        SimpleConsumer consumer;
        final List<MessageView> received = new ArrayList<>();
        final List<Closeable> started = new ArrayList<>();
        int checks;
        final Object checksLock = new Object();

        Session(Map<String, Object> args) {
            ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
                    .setEndpoints(str(args, "endpoint", null))
                    .setRequestTimeout(Duration.ofMillis(num(args, "request_timeout_ms", 5000)));
            if (args.get("ssl") != null) {
                builder.enableSsl(flag(args, "ssl"));
            }
            config = builder.build();
        }

        TransactionResolution answerFor(Object checker, String body) {
            if (checker instanceof String) {
                return TransactionResolution.valueOf((String) checker);
            }
            Map<String, Object> spec = obj(checker);
            String answer = str(obj(spec.get("bodies")), body, str(spec, "default", "UNKNOWN"));
            return TransactionResolution.valueOf(answer);
        }

        void producer(Map<String, Object> step) throws Exception {
            List<String> topics = new ArrayList<>();
            for (Object t : list(step.get("topics"))) {
                topics.add(String.valueOf(t));
            }
            ProducerBuilder builder = provider.newProducerBuilder()
                    .setClientConfiguration(config)
                    .setTopics(topics.toArray(new String[0]));
            Object checker = step.get("checker");
            if (checker != null) {
                builder.setTransactionChecker(view -> {
                    Map<String, Object> info = describe(view, -1);
                    TransactionResolution answer = answerFor(checker, (String) info.get("body"));
                    info.put("answer", answer.name());
                    emit("checked", info);
                    synchronized (checksLock) {
                        checks++;
                        checksLock.notifyAll();
                    }
                    return answer;
                });
            }
            producer = builder.build();
            started.add(producer);
            emit("producer_started");
        }

        Message message(String topic, Map<String, Object> spec, long[] deliverAt) {
            MessageBuilder b = provider.newMessageBuilder()
                    .setTopic(topic)
                    .setBody(str(spec, "body", "").getBytes(StandardCharsets.UTF_8));
            if (spec.get("tag") != null) {
                b.setTag(str(spec, "tag", null));
            }
            List<String> keys = new ArrayList<>();
            for (Object k : list(spec.get("keys"))) {
                keys.add(String.valueOf(k));
            }
            if (!keys.isEmpty()) {
                b.setKeys(keys.toArray(new String[0]));
            }
            for (Map.Entry<String, Object> e : obj(spec.get("properties")).entrySet()) {
                b.addProperty(e.getKey(), String.valueOf(e.getValue()));
            }
            if (spec.get("group") != null) {
                b.setMessageGroup(str(spec, "group", null));
            }
            deliverAt[0] = 0;
            if (spec.get("delay_ms") != null) {
                deliverAt[0] = System.currentTimeMillis() + num(spec, "delay_ms", 0);
                b.setDeliveryTimestamp(deliverAt[0]);
            }
            return b.build();
        }

        void send(Map<String, Object> step) {
            List<Object> messages = list(step.get("messages"));
            for (int k = 0; k < messages.size(); k++) {
                Map<String, Object> spec = obj(messages.get(k));
                long[] deliverAt = new long[1];
                try {
                    SendReceipt receipt = producer.send(message(str(step, "topic", null), spec, deliverAt));
                    emit("sent",
                            "index", k,
                            "body", spec.get("body"),
                            "message_id", receipt.getMessageId().toString(),
                            "offset", receipt instanceof SendReceiptImpl ? ((SendReceiptImpl) receipt).getOffset() : null,
                            "deliver_at_ms", deliverAt[0] == 0 ? null : deliverAt[0],
                            "at_ms", System.currentTimeMillis());
                } catch (Exception exc) {
                    Map<String, Object> out = fields("index", k, "body", spec.get("body"));
                    out.putAll(errorFields(exc));
                    emit("send_error", out);
                }
            }
        }

        void transaction(Map<String, Object> step) throws Exception {
            Map<String, Object> spec = obj(step.get("message"));
            Transaction tx = producer.beginTransaction();
            SendReceipt receipt = producer.send(message(str(step, "topic", null), spec, new long[1]), tx);
            emit("sent",
                    "body", spec.get("body"),
                    "message_id", receipt.getMessageId().toString(),
                    "transaction_id", receipt instanceof SendReceiptImpl ? ((SendReceiptImpl) receipt).getTransactionId() : null,
                    "offset", receipt instanceof SendReceiptImpl ? ((SendReceiptImpl) receipt).getOffset() : null);
            String end = str(step, "end", "commit");
            try {
                if (end.equals("commit")) {
                    tx.commit();
                } else if (end.equals("rollback")) {
                    tx.rollback();
                }
            } catch (Exception exc) {
                Map<String, Object> out = fields("end", end);
                out.putAll(errorFields(exc));
                emit("end_error", out);
                return;
            }
            emit("ended", "end", end, "body", spec.get("body"));
        }

        void waitChecks(Map<String, Object> step) throws InterruptedException {
            long deadline = System.currentTimeMillis() + (long) (real(step, "within_s", 10) * 1000);
            synchronized (checksLock) {
                while (checks < num(step, "count", 1) && System.currentTimeMillis() < deadline) {
                    checksLock.wait(Math.max(1, Math.min(200, deadline - System.currentTimeMillis())));
                }
                emit("checks", "count", checks);
            }
        }

        Map<String, FilterExpression> subscription(Map<String, Object> step) {
            String expression = str(step, "expression", "*");
            FilterExpressionType type = FilterExpressionType.valueOf(str(step, "expression_type", "TAG"));
            return Collections.singletonMap(str(step, "topic", null), new FilterExpression(expression, type));
        }

        void simple(Map<String, Object> step) throws Exception {
            consumer = provider.newSimpleConsumerBuilder()
                    .setClientConfiguration(config)
                    .setConsumerGroup(str(step, "group", null))
                    .setSubscriptionExpressions(subscription(step))
                    .setAwaitDuration(Duration.ofMillis((long) (real(step, "await_s", 1) * 1000)))
                    .build();
            started.add(consumer);
            emit("simple_started");
        }

        void receive(Map<String, Object> step) {
            long until = num(step, "until", 0);
            long untilTotal = num(step, "until_total", 0);
            long deadline = System.currentTimeMillis() + (long) (real(step, "within_s", 0) * 1000);
            Duration invisible = Duration.ofMillis((long) (real(step, "invisible_s", 10) * 1000));
            int got = 0;
            int calls = 0;
            while (true) {
                calls++;
                List<MessageView> batch;
                try {
                    batch = consumer.receive((int) num(step, "max", 16), invisible);
                } catch (Exception exc) {
                    emit("receive_error", errorFields(exc));
                    batch = Collections.emptyList();
                    try {
                        Thread.sleep(200); // a refusal comes back at once: not a busy loop
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                for (MessageView msg : batch) {
                    int index = received.size();
                    received.add(msg);
                    got++;
                    emit("msg", describe(msg, index));
                    if (flag(step, "ack")) {
                        ack(index);
                    }
                }
                boolean enough = got >= until && received.size() >= untilTotal;
                if (enough || System.currentTimeMillis() >= deadline) {
                    break;
                }
            }
            emit("received", "count", got, "calls", calls);
        }

        void ack(int index) {
            try {
                consumer.ack(received.get(index));
            } catch (Exception exc) {
                Map<String, Object> out = fields("index", index);
                out.putAll(errorFields(exc));
                emit("ack_error", out);
                return;
            }
            emit("acked", "index", index);
        }

        void acks(Map<String, Object> step) {
            Object indices = step.get("indices");
            if ("all".equals(indices)) {
                for (int k = 0; k < received.size(); k++) {
                    ack(k);
                }
                return;
            }
            for (Object k : list(indices)) {
                ack(((Number) k).intValue());
            }
        }

        void change(Map<String, Object> step) {
            int index = (int) num(step, "index", 0);
            MessageView msg = received.get(index);
            String old = msg instanceof MessageViewImpl ? ((MessageViewImpl) msg).getReceiptHandle() : null;
            try {
                consumer.changeInvisibleDuration(msg, Duration.ofMillis((long) (real(step, "invisible_s", 10) * 1000)));
            } catch (Exception exc) {
                Map<String, Object> out = fields("index", index);
                out.putAll(errorFields(exc));
                emit("change_error", out);
                return;
            }
            String now = msg instanceof MessageViewImpl ? ((MessageViewImpl) msg).getReceiptHandle() : null;
            emit("changed", "index", index, "old", old, "new", now);
        }

        void push(Map<String, Object> step) throws Exception {
            String failPrefix = str(step, "fail_prefix", "\0");
            long untilOk = num(step, "until_ok", 0);
            long untilFailed = num(step, "until_failed", 0);
            long settleMs = (long) (real(step, "settle_s", 1) * 1000);
            long deadline = System.currentTimeMillis() + (long) (real(step, "within_s", 30) * 1000);
            final long[] counts = {0, 0, System.currentTimeMillis()}; // ok, failed, last
            PushConsumer push = provider.newPushConsumerBuilder()
                    .setClientConfiguration(config)
                    .setConsumerGroup(str(step, "group", null))
                    .setSubscriptionExpressions(subscription(step))
                    .setConsumptionThreadCount(2)
                    .setMessageListener(view -> {
                        Map<String, Object> info = describe(view, -1);
                        boolean failed = ((String) info.get("body")).startsWith(failPrefix);
                        info.put("result", failed ? "FAILURE" : "SUCCESS");
                        emit("msg", info);
                        synchronized (counts) {
                            counts[failed ? 1 : 0]++;
                            counts[2] = System.currentTimeMillis();
                            counts.notifyAll();
                        }
                        return failed ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
                    })
                    .build();
            emit("push_started");
            String reason = "deadline";
            synchronized (counts) {
                while (System.currentTimeMillis() < deadline) {
                    boolean enough = counts[0] >= untilOk && counts[1] >= untilFailed;
                    if (enough && System.currentTimeMillis() - counts[2] >= settleMs) {
                        reason = "expected";
                        break;
                    }
                    counts.wait(100);
                }
            }
            push.close();
            synchronized (counts) {
                emit("pushed", "reason", reason, "ok", counts[0], "failed", counts[1]);
            }
        }

        void close() {
            Collections.reverse(started);
            for (Closeable c : started) {
                try {
                    c.close();
                } catch (Exception exc) {
                    emit("shutdown_error", errorFields(exc));
                }
            }
        }

        void run(Map<String, Object> step) throws Exception {
            String op = str(step, "op", "");
            switch (op) {
                case "producer": producer(step); break;
                case "send": send(step); break;
                case "transaction": transaction(step); break;
                case "wait_checks": waitChecks(step); break;
                case "simple": simple(step); break;
                case "receive": receive(step); break;
                case "ack": acks(step); break;
                case "change": change(step); break;
                case "sleep": Thread.sleep((long) (real(step, "s", 0) * 1000)); break;
                case "push": push(step); break;
                default: throw new IllegalArgumentException("unknown op " + op);
            }
        }
    }

    static void watchdog(double deadlineS) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep((long) (deadlineS * 1000));
            } catch (InterruptedException e) {
                return;
            }
            label = "";
            emit("done", "error", "deadline of " + deadlineS + " s passed");
            Runtime.getRuntime().halt(3);
        });
        t.setDaemon(true);
        t.start();
    }

    public static void main(String[] argv) throws Exception {
        String command = argv.length > 0 ? argv[0] : "run";
        if (command.equals("version")) {
            emit("version", "client_version", MetadataUtils.getVersion());
            return;
        }
        if (!command.equals("run")) {
            System.err.println("usage: Java5Client.java run|version");
            System.exit(2);
        }
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = stdin.readLine();
        if (line == null) {
            emit("done", "error", "no arguments on stdin");
            Runtime.getRuntime().halt(2);
        }
        Map<String, Object> args = obj(Json.parse(line));
        watchdog(real(args, "deadline_s", 60));
        emit("started", "client_version", MetadataUtils.getVersion(), "ssl", args.get("ssl"));
        Session session = null;
        try {
            session = new Session(args);
            emit("configured", "ssl_enabled", session.config.isSslEnabled());
            List<Object> steps = list(args.get("steps"));
            for (int k = 0; k < steps.size(); k++) {
                Map<String, Object> step = obj(steps.get(k));
                label = str(step, "label", k + "-" + str(step, "op", ""));
                emit("step", "op", step.get("op"));
                session.run(step);
            }
        } catch (Throwable exc) {
            Map<String, Object> out = errorFields(exc);
            emit("done", "error", out.get("type") + ": " + out.get("text"), "code", out.get("code"));
            Runtime.getRuntime().halt(1);
        }
        label = "";
        session.close();
        emit("done", "received", session.received.size(), "checks", session.checks);
        Runtime.getRuntime().halt(0);
    }
}
