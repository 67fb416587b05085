package aerolite.interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.logging.inner.Appender;
import org.apache.rocketmq.logging.inner.Level;
import org.apache.rocketmq.logging.inner.Logger;
import org.apache.rocketmq.logging.inner.LoggingBuilder;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.ConsumeQueue;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.MessageArrivingListener;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.PutMessageStatus;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * The Java side of Aerolite's store interop tests (tests/interop/test_java_store.py): Apache
 * RocketMQ's own {@link DefaultMessageStore} (rocketmq-store 4.9.8) used directly, no broker.
 *
 * <pre>
 *   store-write DIR N [key=value...]   put N messages (2 topics x 4 queues, tags, keys, UNIQ_KEY,
 *                                      bodies over 4 KiB, an empty body, IPv6 hosts, two
 *                                      batches, prepared/commit/rollback records, two delayed
 *                                      messages), wait for dispatch, shut down cleanly; prints a
 *                                      JSON manifest: one "msg" line per record, then "summary"
 *   store-write DIR N stream=true ...  plain messages only, every "msg" line printed as soon as
 *                                      its put returns (pause=K: sleep 1 ms every K puts); the
 *                                      store is never shut down: after N messages it prints
 *                                      "written" and waits to be killed
 *   store-read DIR [key=value...]      load() + start() a store written by someone else; prints
 *                                      "load", every message of every queue ("msg", read with
 *                                      getMessage and MessageDecoder), per-queue "queue" lines,
 *                                      then answers stdin lines "query TOPIC KEY" (queryMessage)
 *                                      and "look OFFSET" (lookMessageByOffset), tab-separated;
 *                                      shuts down and prints "shutdown"
 *   store-hold DIR [key=value...]      load() + start(), print "start" (ok or the error), hold the
 *                                      store (and its lock) until stdin closes
 * </pre>
 *
 * Options (both sides of a test must agree): cl=mappedFileSizeCommitLog,
 * cq=mappedFileSizeConsumeQueue, slots=maxHashSlotNum, index=maxIndexNum,
 * flush=ASYNC_FLUSH|SYNC_FLUSH. The HA service is started by DefaultMessageStore.start(); it
 * listens on an ephemeral port (haListenPort=0) and is never connected to.
 *
 * RocketMQ's own log goes to stderr (inner logger, INFO), the protocol lines to stdout.
 */
final class StoreInterop {
    static final String TOPIC_A = "JTopicA";
    static final String TOPIC_B = "JTopicB";
    static final int QUEUES = 4;
    static final String CLUSTER = "InteropCluster";
    static final String GROUP = "interop-group";
    static final String UNICODE_NOTE = "\u00fc\u2713\ud83d\ude80";

    private final PrintStream out;
    private final Map<String, String> opts;
    private final AtomicLong arrivals = new AtomicLong();

    private StoreInterop(PrintStream out, Map<String, String> opts) {
        this.out = out;
        this.opts = opts;
    }

    static void main(PrintStream out, String[] args) throws Exception {
        routeStoreLogToStderr();
        String mode = args[0];
        String dir = args[1];
        int firstOpt = mode.equals("store-write") ? 3 : 2;
        Map<String, String> opts = new TreeMap<>();
        opts.put("cl", String.valueOf(256 * 1024));
        opts.put("cq", String.valueOf(30 * 20));
        opts.put("slots", "512");
        opts.put("index", "1024");
        opts.put("flush", "ASYNC_FLUSH");
        opts.put("stream", "false");
        opts.put("pause", "0");
        for (int i = firstOpt; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("option " + args[i] + " is not key=value");
            }
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        StoreInterop interop = new StoreInterop(out, opts);
        try {
            switch (mode) {
                case "store-write":
                    interop.write(dir, Integer.parseInt(args[2]));
                    break;
                case "store-read":
                    interop.read(dir);
                    break;
                case "store-hold":
                    interop.hold(dir);
                    break;
                default:
                    throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Exception | Error e) {
            // The store's service threads are not daemons: exit rather than hang.
            e.printStackTrace();
            out.flush();
            System.exit(1);
        }
    }

    static void routeStoreLogToStderr() {
        Appender appender = LoggingBuilder.newAppenderBuilder()
            .withConsoleAppender(LoggingBuilder.SYSTEM_ERR)
            .withLayout(LoggingBuilder.newLayoutBuilder().withDefaultLayout().build())
            .build();
        Logger.getRootLogger().addAppender(appender);
        Logger.getRootLogger().setLevel(Level.INFO);
    }

    private void emit(Map<String, Object> json) {
        synchronized (out) {
            out.println(RemotingInterop.Json.write(json));
            out.flush();
        }
    }

    private static Map<String, Object> line(String kind) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", kind);
        return m;
    }

    // ------------------------------------------------------------------------------ the store

    private DefaultMessageStore open(String dir) throws IOException {
        MessageStoreConfig config = new MessageStoreConfig();
        config.setStorePathRootDir(dir);
        config.setMappedFileSizeCommitLog(Integer.parseInt(opts.get("cl")));
        config.setMappedFileSizeConsumeQueue(Integer.parseInt(opts.get("cq")));
        config.setMaxHashSlotNum(Integer.parseInt(opts.get("slots")));
        config.setMaxIndexNum(Integer.parseInt(opts.get("index")));
        config.setFlushDiskType(FlushDiskType.valueOf(opts.get("flush")));
        config.setHaListenPort(0);
        config.setDiskMaxUsedSpaceRatio(95);
        MessageArrivingListener listener = (topic, queueId, logicOffset, tagsCode, msgStoreTime,
            filterBitMap, properties) -> arrivals.incrementAndGet();
        return new DefaultMessageStore(config, new BrokerStatsManager(CLUSTER, true), listener,
            new BrokerConfig());
    }

    private static void awaitDispatch(DefaultMessageStore store) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 30_000;
        while (store.dispatchBehindBytes() > 0) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("dispatch still " + store.dispatchBehindBytes()
                    + " bytes behind after 30 s");
            }
            Thread.sleep(5);
        }
    }

    // ------------------------------------------------------------------------------ writing

    static byte[] body(int i, int size) {
        byte[] b = new byte[size];
        for (int j = 0; j < size; j++) {
            b[j] = (byte) (i * 31 + j * 7 + (j >> 8));
        }
        return b;
    }

    static int bodySize(int i) {
        if (i == 3) {
            return 0;
        }
        if (i % 17 == 5) {
            return 4097 + (i * 733) % 16000;
        }
        return 20 + (i * 131) % 1500;
    }

    static String tagsOf(int i) {
        switch (i % 5) {
            case 0:
                return null;
            case 1:
                return "TagA";
            case 2:
                return "TagB";
            case 3:
                return "Tag-\u00e9\u00df";
            default:
                return "TagLong-" + (i % 11);
        }
    }

    static String keysOf(int i) {
        String keys = "k-" + i + " shared-k" + (i % 7);
        if (i % 50 == 3) {
            keys += " \u043a\u043b\u044e\u0447-\ud83d\ude80-" + i;
        }
        return keys;
    }

    static InetSocketAddress address(String ip, int port) throws UnknownHostException {
        return new InetSocketAddress(InetAddress.getByName(ip), port);
    }

    private MessageExtBrokerInner inner(int i, String topic, int queueId) throws UnknownHostException {
        MessageExtBrokerInner m = new MessageExtBrokerInner();
        m.setTopic(topic);
        m.setQueueId(queueId);
        m.setBody(body(i, bodySize(i)));
        m.setFlag(i);
        String tags = tagsOf(i);
        if (tags != null) {
            m.setTags(tags);
        }
        m.setKeys(keysOf(i));
        MessageClientIDSetter.setUniqID(m);
        m.putUserProperty("idx", String.valueOf(i));
        if (i % 9 == 4) {
            m.putUserProperty("note", UNICODE_NOTE);
        }
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_CLUSTER, CLUSTER);
        m.setBornTimestamp(System.currentTimeMillis() - 5);
        String bornIp = i % 97 == 13 || i % 89 == 7 ? "::1" : "127.0.0.1";
        String storeIp = i % 89 == 7 ? "::1" : "127.0.0.1";
        m.setBornHost(address(bornIp, 40000 + i % 1000));
        m.setStoreHost(address(storeIp, 10911));
        m.setReconsumeTimes(i % 3);
        m.setTagsCode(tags == null ? 0 : MessageExtBrokerInner.tagsString2tagsCode(tags));
        m.setPropertiesString(MessageDecoder.messageProperties2String(m.getProperties()));
        return m;
    }

    private Map<String, Object> entry(String kind, int i, String topic, int queueId, long queueOffset,
        long commitLogOffset, int size, long storeTimestamp, int sysFlag, boolean consumable,
        Message m) {
        Map<String, Object> e = line("msg");
        e.put("type", kind);
        e.put("i", i);
        e.put("topic", topic);
        e.put("queueId", queueId);
        e.put("queueOffset", queueOffset);
        e.put("commitLogOffset", commitLogOffset);
        e.put("size", size);
        e.put("storeTimestamp", storeTimestamp);
        e.put("sysFlag", sysFlag);
        e.put("consumable", consumable);
        e.put("flag", m.getFlag());
        e.put("tags", m.getTags());
        e.put("keys", m.getKeys());
        e.put("uniqKey", MessageClientIDSetter.getUniqID(m));
        e.put("bodySha256", sha256(m.getBody()));
        e.put("bodyLength", m.getBody() == null ? 0 : m.getBody().length);
        return e;
    }

    private void write(String dir, int n) throws Exception {
        boolean stream = Boolean.parseBoolean(opts.get("stream"));
        int pause = Integer.parseInt(opts.get("pause"));
        DefaultMessageStore store = open(dir);
        if (!store.load()) {
            throw new IllegalStateException("DefaultMessageStore.load() failed on " + dir);
        }
        store.start();
        List<Map<String, Object>> manifest = new ArrayList<>();
        long preparedToCommit = -1;
        long preparedToRollBack = -1;
        int[] batchAt = stream ? new int[0] : new int[] {n / 3, 2 * n / 3};
        for (int i = 0; i < n; i++) {
            String topic = i % 2 == 0 ? TOPIC_A : TOPIC_B;
            int queueId = (i / 2) % QUEUES;
            for (int at : batchAt) {
                if (i == at) {
                    manifest.addAll(putBatch(store, i, at == batchAt[0] ? 5 : 8));
                }
            }
            MessageExtBrokerInner m = inner(i, topic, queueId);
            String type = "normal";
            boolean consumable = true;
            if (!stream && i == n / 4) {
                type = "prepared";
                m.setSysFlag(MessageSysFlag.resetTransactionValue(m.getSysFlag(),
                    MessageSysFlag.TRANSACTION_PREPARED_TYPE));
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_TRANSACTION_PREPARED, "true");
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_PRODUCER_GROUP, "interop-pg");
                consumable = false;
            } else if (!stream && i == n / 4 + 1) {
                type = "prepared";
                m.setSysFlag(MessageSysFlag.resetTransactionValue(m.getSysFlag(),
                    MessageSysFlag.TRANSACTION_PREPARED_TYPE));
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_TRANSACTION_PREPARED, "true");
                consumable = false;
            } else if (!stream && i == n / 4 + 5) {
                type = "commit";
                m.setSysFlag(MessageSysFlag.resetTransactionValue(m.getSysFlag(),
                    MessageSysFlag.TRANSACTION_COMMIT_TYPE));
                m.setPreparedTransactionOffset(preparedToCommit);
            } else if (!stream && i == n / 4 + 6) {
                type = "rollback";
                m.setSysFlag(MessageSysFlag.resetTransactionValue(m.getSysFlag(),
                    MessageSysFlag.TRANSACTION_ROLLBACK_TYPE));
                m.setPreparedTransactionOffset(preparedToRollBack);
                consumable = false;
            } else if (!stream && (i == n / 2 || i == n / 2 + 3)) {
                type = "delay";
                m.setDelayTimeLevel(i == n / 2 ? 18 : 17);
            }
            m.setPropertiesString(MessageDecoder.messageProperties2String(m.getProperties()));
            PutMessageResult r = store.putMessage(m);
            if (r.getPutMessageStatus() != PutMessageStatus.PUT_OK) {
                throw new IllegalStateException("put " + i + ": " + r);
            }
            AppendMessageResult a = r.getAppendMessageResult();
            if (type.equals("prepared")) {
                if (i == n / 4) {
                    preparedToCommit = a.getWroteOffset();
                } else {
                    preparedToRollBack = a.getWroteOffset();
                }
            }
            // A delayed message was moved to SCHEDULE_TOPIC_XXXX by the store itself.
            Map<String, Object> e = entry(type, i, m.getTopic(), m.getQueueId(), a.getLogicsOffset(),
                a.getWroteOffset(), a.getWroteBytes(), a.getStoreTimestamp(), m.getSysFlag(),
                consumable, m);
            e.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
            if (type.equals("delay")) {
                e.put("delayLevel", m.getDelayTimeLevel());
            }
            if (stream) {
                emit(e);
                if (pause > 0 && i % pause == pause - 1) {
                    Thread.sleep(1);
                }
            } else {
                manifest.add(e);
            }
        }
        if (stream) {
            emit(line("written"));
            // Never shut down: the test kills this process.
            Thread.sleep(Long.MAX_VALUE);
            return;
        }
        awaitDispatch(store);
        for (Map<String, Object> e : manifest) {
            // Java's own reading of what it wrote: the properties as stored.
            MessageExt stored = store.lookMessageByOffset((Long) e.get("commitLogOffset"));
            if (stored == null) {
                throw new IllegalStateException("cannot read back " + e);
            }
            e.put("properties", new TreeMap<>(stored.getProperties()));
            e.put("bornHost", hostText(stored.getBornHost()));
            e.put("storeHost", hostText(stored.getStoreHost()));
            e.put("reconsumeTimes", stored.getReconsumeTimes());
            e.put("bornTimestamp", stored.getBornTimestamp());
            ConsumeQueue cq = store.findConsumeQueue(stored.getTopic(), stored.getQueueId());
            if ((Boolean) e.get("consumable")) {
                e.put("tagsCode", cqTagsCode(cq, (Long) e.get("queueOffset")));
            }
            emit(e);
        }
        Map<String, Object> summary = summary(store);
        summary.put("arrivals", arrivals.get());
        store.shutdown();
        summary.put("abortAfterShutdown", Files.exists(Paths.get(dir, "abort")));
        emit(summary);
    }

    private List<Map<String, Object>> putBatch(DefaultMessageStore store, int i, int count)
        throws Exception {
        String topic = TOPIC_A;
        int queueId = 1;
        List<Message> messages = new ArrayList<>();
        for (int k = 0; k < count; k++) {
            int id = 100_000 + i * 10 + k;
            Message m = new Message(topic, tagsOf(id), keysOf(id), body(id, k == 2 ? 6000 : 50 + 13 * k));
            m.setFlag(k);
            MessageClientIDSetter.setUniqID(m);
            m.putUserProperty("idx", String.valueOf(id));
            if (k == 0) {
                m.putUserProperty("note", UNICODE_NOTE);
            }
            messages.add(m);
        }
        MessageExtBatch batch = new MessageExtBatch();
        batch.setTopic(topic);
        batch.setQueueId(queueId);
        batch.setBody(MessageDecoder.encodeMessages(messages));
        batch.setBornTimestamp(System.currentTimeMillis());
        batch.setBornHost(address("127.0.0.1", 45678));
        batch.setStoreHost(address("127.0.0.1", 10911));
        MessageAccessor.putProperty(batch, MessageConst.PROPERTY_CLUSTER, CLUSTER);
        PutMessageResult r = store.putMessages(batch);
        if (r.getPutMessageStatus() != PutMessageStatus.PUT_OK) {
            throw new IllegalStateException("putMessages: " + r);
        }
        AppendMessageResult a = r.getAppendMessageResult();
        String[] ids = a.getMsgId().split(",");
        if (ids.length != count || a.getMsgNum() != count) {
            throw new IllegalStateException("batch of " + count + " gave " + a);
        }
        long[] offsets = new long[count + 1];
        for (int k = 0; k < count; k++) {
            offsets[k] = MessageDecoder.decodeMessageId(ids[k]).getOffset();
        }
        offsets[count] = a.getWroteOffset() + a.getWroteBytes();
        List<Map<String, Object>> out = new ArrayList<>();
        for (int k = 0; k < count; k++) {
            Map<String, Object> e = entry("batch", 100_000 + i * 10 + k, topic, queueId,
                a.getLogicsOffset() + k, offsets[k], (int) (offsets[k + 1] - offsets[k]),
                a.getStoreTimestamp(), batch.getSysFlag(), true, messages.get(k));
            e.put("preparedTransactionOffset", 0L);
            e.put("flag", k);
            out.add(e);
        }
        return out;
    }

    static long cqTagsCode(ConsumeQueue cq, long queueOffset) {
        SelectMappedBufferResult unit = cq.getIndexBuffer(queueOffset);
        if (unit == null) {
            return Long.MIN_VALUE;
        }
        try {
            ByteBuffer b = unit.getByteBuffer();
            b.getLong();
            b.getInt();
            return b.getLong();
        } finally {
            unit.release();
        }
    }

    static String hostText(java.net.SocketAddress address) {
        InetSocketAddress a = (InetSocketAddress) address;
        String ip = a.getAddress().getHostAddress();
        return (ip.contains(":") ? "[" + ip + "]" : ip) + ":" + a.getPort();
    }

    private Map<String, Object> summary(DefaultMessageStore store) {
        Map<String, Object> s = line("summary");
        s.put("maxPhyOffset", store.getMaxPhyOffset());
        s.put("minPhyOffset", store.getMinPhyOffset());
        s.put("dispatchBehindBytes", store.dispatchBehindBytes());
        List<Object> queues = new ArrayList<>();
        for (Map.Entry<String, ?> t : new TreeMap<>(store.getConsumeQueueTable()).entrySet()) {
            for (Object qid : new TreeMap<>(store.getConsumeQueueTable().get(t.getKey())).keySet()) {
                int q = (Integer) qid;
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("topic", t.getKey());
                m.put("queueId", q);
                m.put("minOffset", store.getMinOffsetInQueue(t.getKey(), q));
                m.put("maxOffset", store.getMaxOffsetInQueue(t.getKey(), q));
                queues.add(m);
            }
        }
        s.put("queues", queues);
        return s;
    }

    // ------------------------------------------------------------------------------ reading

    private Map<String, Object> describe(MessageExt m) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("topic", m.getTopic());
        e.put("queueId", m.getQueueId());
        e.put("queueOffset", m.getQueueOffset());
        e.put("commitLogOffset", m.getCommitLogOffset());
        e.put("size", m.getStoreSize());
        e.put("storeTimestamp", m.getStoreTimestamp());
        e.put("bornTimestamp", m.getBornTimestamp());
        e.put("bornHost", hostText(m.getBornHost()));
        e.put("storeHost", hostText(m.getStoreHost()));
        e.put("sysFlag", m.getSysFlag());
        e.put("flag", m.getFlag());
        e.put("reconsumeTimes", m.getReconsumeTimes());
        e.put("preparedTransactionOffset", m.getPreparedTransactionOffset());
        e.put("bodyCRC", m.getBodyCRC());
        // RocketMQ's own CRC of the body as decoded: recovery checks only the last 3 segments.
        e.put("crcOk", UtilAll.crc32(m.getBody() == null ? new byte[0] : m.getBody()) == m.getBodyCRC());
        e.put("msgId", m.getMsgId());
        e.put("tags", m.getTags());
        e.put("keys", m.getKeys());
        e.put("properties", new TreeMap<>(m.getProperties()));
        e.put("bodySha256", sha256(m.getBody()));
        e.put("bodyLength", m.getBody() == null ? 0 : m.getBody().length);
        return e;
    }

    private void read(String dir) throws Exception {
        Map<String, Object> load = line("load");
        load.put("abortBefore", Files.exists(Paths.get(dir, "abort")));
        DefaultMessageStore store = open(dir);
        boolean ok = store.load();
        load.put("ok", ok);
        load.put("maxPhyOffset", store.getMaxPhyOffset());
        load.put("minPhyOffset", store.getMinPhyOffset());
        emit(load);
        if (!ok) {
            return;
        }
        store.start();
        awaitDispatch(store);
        Map<String, Object> started = line("started");
        started.put("maxPhyOffset", store.getMaxPhyOffset());
        emit(started);
        for (Map.Entry<String, ?> t : new TreeMap<>(store.getConsumeQueueTable()).entrySet()) {
            String topic = t.getKey();
            for (Object qid : new TreeMap<>(store.getConsumeQueueTable().get(topic)).keySet()) {
                readQueue(store, topic, (Integer) qid);
            }
        }
        emit(summary(store));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String request;
        while ((request = in.readLine()) != null) {
            String[] f = request.split("\t", -1);
            if (f[0].equals("query") && f.length == 3) {
                query(store, f[1], f[2]);
            } else if (f[0].equals("look") && f.length == 2) {
                long offset = Long.parseLong(f[1]);
                Map<String, Object> e = line("look");
                e.put("offset", offset);
                MessageExt m = store.lookMessageByOffset(offset);
                e.put("found", m != null);
                if (m != null) {
                    e.put("message", describe(m));
                }
                emit(e);
            } else if (!request.isEmpty()) {
                throw new IllegalArgumentException("bad request line " + Arrays.toString(f));
            }
        }
        store.shutdown();
        Map<String, Object> down = line("shutdown");
        down.put("abortAfterShutdown", Files.exists(Paths.get(dir, "abort")));
        emit(down);
    }

    private void readQueue(DefaultMessageStore store, String topic, int queueId) {
        long min = store.getMinOffsetInQueue(topic, queueId);
        long max = store.getMaxOffsetInQueue(topic, queueId);
        ConsumeQueue cq = store.findConsumeQueue(topic, queueId);
        long offset = min;
        int found = 0;
        List<String> statuses = new ArrayList<>();
        while (offset < max) {
            GetMessageResult r = store.getMessage(GROUP, topic, queueId, offset, 32, null);
            try {
                if (r == null) {
                    statuses.add("null");
                    break;
                }
                if (r.getStatus() != GetMessageStatus.FOUND) {
                    statuses.add(r.getStatus() + "@" + offset);
                }
                for (ByteBuffer b : r.getMessageBufferList()) {
                    MessageExt m = MessageDecoder.decode(b, true, false);
                    Map<String, Object> e = line("msg");
                    if (m == null) {
                        e.put("undecodable", true);
                    } else {
                        e.putAll(describe(m));
                        e.put("tagsCode", cqTagsCode(cq, m.getQueueOffset()));
                    }
                    emit(e);
                    found++;
                }
                if (r.getNextBeginOffset() <= offset) {
                    statuses.add("stuck@" + offset);
                    break;
                }
                offset = r.getNextBeginOffset();
            } finally {
                if (r != null) {
                    r.release();
                }
            }
        }
        Map<String, Object> q = line("queue");
        q.put("topic", topic);
        q.put("queueId", queueId);
        q.put("minOffset", min);
        q.put("maxOffset", max);
        q.put("found", found);
        q.put("statuses", statuses);
        emit(q);
    }

    private void query(DefaultMessageStore store, String topic, String key) {
        QueryMessageResult r = store.queryMessage(topic, key, 64, 0, Long.MAX_VALUE);
        Map<String, Object> e = line("query");
        e.put("topic", topic);
        e.put("key", key);
        List<Object> offsets = new ArrayList<>();
        List<Object> keys = new ArrayList<>();
        List<Object> uniqKeys = new ArrayList<>();
        try {
            for (ByteBuffer b : r.getMessageBufferList()) {
                MessageExt m = MessageDecoder.decode(b, true, false);
                offsets.add(m.getCommitLogOffset());
                keys.add(m.getKeys());
                uniqKeys.add(m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
            }
        } finally {
            r.release();
        }
        e.put("offsets", offsets);
        e.put("keys", keys);
        e.put("uniqKeys", uniqKeys);
        emit(e);
    }

    // ------------------------------------------------------------------------------ holding

    private void hold(String dir) throws Exception {
        DefaultMessageStore store = open(dir);
        Map<String, Object> e = line("start");
        boolean ok = store.load();
        boolean started = false;
        if (ok) {
            try {
                store.start();
                started = true;
            } catch (Exception | Error ex) {
                e.put("error", ex.toString());
            }
        }
        e.put("load", ok);
        e.put("ok", started);
        emit(e);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // hold until stdin closes
        }
        if (started) {
            store.shutdown();
        }
        emit(line("shutdown"));
    }

    // ------------------------------------------------------------------------------ helpers

    static String sha256(byte[] data) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(data == null ? new byte[0] : data);
            return RemotingInterop.Hex.encode(d);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
