// Apache RocketMQ's own Java client (rocketmq-client 4.9.7) as a test driver, for make interop.
//
// Launched as a single-file program: java -cp 'tests/interop/broker/target/lib/*' JavaClient.java
// COMMAND. Like tests/e2e/drivers/cpp_client.py it reads one JSON line of arguments on stdin and
// writes JSON lines on stdout: "started", one line per message sent or received, "done".
// A "stop" line or EOF on stdin ends a consumer early. Every run ends by its own deadline.

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class JavaClient {
    private static final Object OUT = new Object();

    static void emit(String event, Map<String, Object> fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", event);
        line.putAll(fields);
        synchronized (OUT) {
            System.out.println(JSON.toJSONString(line));
            System.out.flush();
        }
    }

    static Map<String, Object> describe(MessageExt msg) {
        Map<String, Object> info = new LinkedHashMap<>();
        info.put("topic", msg.getTopic());
        info.put("body", new String(msg.getBody(), StandardCharsets.UTF_8));
        info.put("tags", msg.getTags());
        info.put("keys", msg.getKeys());
        info.put("properties", msg.getProperties());
        info.put("msg_id", msg.getMsgId());
        info.put("queue_id", msg.getQueueId());
        info.put("queue_offset", msg.getQueueOffset());
        info.put("reconsume_times", msg.getReconsumeTimes());
        info.put("born_timestamp", msg.getBornTimestamp());
        info.put("store_timestamp", msg.getStoreTimestamp());
        info.put("at", System.currentTimeMillis());
        return info;
    }

    static Message message(String topic, JSONObject spec) {
        Message msg = new Message(topic, spec.getString("body").getBytes(StandardCharsets.UTF_8));
        if (spec.containsKey("tags")) {
            msg.setTags(spec.getString("tags"));
        }
        if (spec.containsKey("keys")) {
            msg.setKeys(spec.getString("keys"));
        }
        if (spec.containsKey("delay_level")) {
            msg.setDelayTimeLevel(spec.getIntValue("delay_level"));
        }
        JSONObject props = spec.getJSONObject("properties");
        if (props != null) {
            for (String key : props.keySet()) {
                msg.putUserProperty(key, props.getString(key));
            }
        }
        return msg;
    }

    static Map<String, Object> sendFields(int index, SendResult result) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("index", index);
        fields.put("status", result.getSendStatus().name());
        fields.put("msg_id", result.getMsgId());
        fields.put("offset_msg_id", result.getOffsetMsgId());
        fields.put("queue_id", result.getMessageQueue().getQueueId());
        fields.put("queue_offset", result.getQueueOffset());
        fields.put("at", System.currentTimeMillis());
        return fields;
    }

    static Map<String, Object> fields(Object... pairs) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            map.put((String) pairs[i], pairs[i + 1]);
        }
        return map;
    }

    /** Waits for "stop" or EOF on stdin, or the deadline, or done() to say enough. */
    static String waitUntil(BufferedReader stdin, long deadlineMs, java.util.function.BooleanSupplier done)
            throws Exception {
        CountDownLatch stop = new CountDownLatch(1);
        Thread watcher = new Thread(() -> {
            try {
                String line;
                while ((line = stdin.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            } catch (Exception ignored) {
                // stdin closed: the test went away
            }
            stop.countDown();
        });
        watcher.setDaemon(true);
        watcher.start();
        while (System.currentTimeMillis() < deadlineMs) {
            if (stop.await(50, TimeUnit.MILLISECONDS)) {
                return "stopped";
            }
            if (done.getAsBoolean()) {
                return "expected";
            }
        }
        return "deadline";
    }

    static void produce(JSONObject args) throws Exception {
        // "trace": enableMsgTrace, to "trace_topic" if given (else RMQ_SYS_TRACE_TOPIC).
        DefaultMQProducer producer = new DefaultMQProducer(
            args.getString("group"), args.getBooleanValue("trace"), args.getString("trace_topic"));
        producer.setNamesrvAddr(args.getString("namesrv"));
        producer.setSendMsgTimeout(args.getIntValue("timeout_ms") > 0 ? args.getIntValue("timeout_ms") : 3000);
        producer.start();
        emit("started", fields());
        JSONArray messages = args.getJSONArray("messages");
        int ok = 0;
        for (int i = 0; i < messages.size(); i++) {
            try {
                SendResult result = producer.send(message(args.getString("topic"), messages.getJSONObject(i)));
                ok += result.getSendStatus().name().equals("SEND_OK") ? 1 : 0;
                emit("sent", sendFields(i, result));
            } catch (Exception e) {
                emit("send_error", fields("index", i, "error", e.toString()));
            }
        }
        if (args.getBooleanValue("trace")) {
            // The trace dispatcher sends asynchronously, and its shutdown does not wait for
            // sends in flight: a long-running application's last records would go out on the
            // next batch; give them that time before exiting.
            Thread.sleep(1500);
        }
        producer.shutdown();
        emit("done", fields("ok", ok));
    }

    static void consume(JSONObject args, BufferedReader stdin) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(
            args.getString("group"), args.getBooleanValue("trace"), args.getString("trace_topic"));
        consumer.setNamesrvAddr(args.getString("namesrv"));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        String topic = args.getString("topic");
        if (args.containsKey("sql")) {
            consumer.subscribe(topic, MessageSelector.bySql(args.getString("sql")));
        } else {
            consumer.subscribe(topic, args.containsKey("expression") ? args.getString("expression") : "*");
        }
        boolean failFirst = args.getBooleanValue("fail_first");
        int expect = args.containsKey("expect") ? args.getIntValue("expect") : -1;
        long settleMs = (long) (1000 * (args.containsKey("settle_s") ? args.getDoubleValue("settle_s") : 1.0));
        AtomicInteger count = new AtomicInteger();
        AtomicLong last = new AtomicLong(System.currentTimeMillis());
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                boolean fail = failFirst && msg.getReconsumeTimes() == 0;
                Map<String, Object> info = describe(msg);
                info.put("answer", fail ? "RECONSUME_LATER" : "CONSUME_SUCCESS");
                emit("msg", info);
                if (fail) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                count.incrementAndGet();
                last.set(System.currentTimeMillis());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            consumer.start();
        } catch (Exception e) {
            emit("start_error", fields("error", e.toString()));
            emit("done", fields("reason", "start_error", "count", 0));
            return;
        }
        emit("started", fields());
        long deadline = System.currentTimeMillis() + (long) (1000 * args.getDoubleValue("deadline_s"));
        String reason = waitUntil(stdin, deadline,
            () -> expect >= 0 && count.get() >= expect && System.currentTimeMillis() - last.get() >= settleMs);
        if (args.getBooleanValue("trace")) {
            Thread.sleep(1500); // the last trace records' batch, as for the producer
        }
        consumer.shutdown();
        emit("done", fields("reason", reason, "count", count.get()));
    }

    static void transaction(JSONObject args, BufferedReader stdin) throws Exception {
        // Each message's body names what happens to it: "<local>[-then-<check answers>]", e.g.
        // "commit", "rollback", "unknown-then-commit", "unknown-then-unknown".
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer(args.getString("group"));
        producer.setNamesrvAddr(args.getString("namesrv"));
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return state(plan(msg)[0]);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String[] plan = plan(msg);
                int n = checks.computeIfAbsent(msg.getTransactionId(), k -> new AtomicInteger()).incrementAndGet();
                String answer = plan.length > 1 ? plan[1] : "unknown";
                Map<String, Object> info = describe(msg);
                info.put("transaction_id", msg.getTransactionId());
                info.put("check", n);
                info.put("answer", answer);
                emit("check", info);
                return state(answer);
            }
        });
        producer.start();
        emit("started", fields());
        JSONArray messages = args.getJSONArray("messages");
        for (int i = 0; i < messages.size(); i++) {
            try {
                TransactionSendResult result =
                    producer.sendMessageInTransaction(message(args.getString("topic"), messages.getJSONObject(i)), null);
                Map<String, Object> sent = sendFields(i, result);
                sent.put("local_state", result.getLocalTransactionState().name());
                sent.put("transaction_id", result.getTransactionId());
                emit("sent", sent);
            } catch (Exception e) {
                emit("send_error", fields("index", i, "error", e.toString()));
            }
        }
        int expectChecks = args.containsKey("expect_checks") ? args.getIntValue("expect_checks") : 0;
        long deadline = System.currentTimeMillis() + (long) (1000 * args.getDoubleValue("deadline_s"));
        String reason = waitUntil(stdin, deadline,
            () -> checks.values().stream().mapToInt(AtomicInteger::get).sum() >= expectChecks);
        producer.shutdown();
        emit("done", fields("reason", reason, "checks", checks.values().stream().mapToInt(AtomicInteger::get).sum()));
    }

    static String[] plan(Message msg) {
        return new String(msg.getBody(), StandardCharsets.UTF_8).split("-then-");
    }

    static LocalTransactionState state(String word) {
        switch (word) {
            case "commit":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            default:
                return LocalTransactionState.UNKNOW;
        }
    }

    public static void main(String[] argv) throws Exception {
        System.setProperty("rocketmq.client.logUseSlf4j", "false");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        JSONObject args = JSON.parseObject(stdin.readLine());
        try {
            switch (argv[0]) {
                case "produce":
                    produce(args);
                    break;
                case "consume":
                    consume(args, stdin);
                    break;
                case "transaction":
                    transaction(args, stdin);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + argv[0]);
            }
        } catch (Exception e) {
            emit("error", fields("error", e.toString()));
            System.exit(1);
        }
        System.exit(0); // the client leaves non-daemon threads behind
    }
}
