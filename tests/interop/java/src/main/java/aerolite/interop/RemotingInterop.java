package aerolite.interop;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.netty.NettyRemotingServer;
import org.apache.rocketmq.remoting.netty.NettyRequestProcessor;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.FastCodesHeader;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;

/**
 * The Java side of Aerolite's remoting interop tests, built on Apache RocketMQ's own
 * rocketmq-remoting (NettyRemotingServer, NettyRemotingClient, RemotingCommand).
 *
 * <pre>
 *   server                          NettyRemotingServer on an ephemeral port; prints "ready port=N"
 *                                   and runs until stdin closes
 *   client HOST:PORT N JSON|ROCKETMQ NettyRemotingClient against a server speaking the codes below;
 *                                   prints one JSON summary line
 *   encode                          JSON lines: frames RemotingCommand encodes, with their fields
 *   decode                          hex frames on stdin (length prefix included), one per line;
 *                                   JSON lines with the fields RemotingCommand.decode read
 *   store-write | store-read | store-hold DIR ...
 *                                   rocketmq-store's DefaultMessageStore on a directory: see
 *                                   StoreInterop
 * </pre>
 *
 * Request codes both servers (this one and the Python test's) understand: 1000 echo (extFields,
 * remark and body back; a oneway 1000 is recorded by its "id"), 1001 call back the client over
 * the same connection (request 2001, and a oneway 2002 when "notify" is set), 1002 fails with an
 * exception, 1003 lists the oneway ids recorded with the prefix "prefix", 1004 describes the
 * request as it was decoded. Codes 2001/2002 are answered by the client.
 *
 * Only the protocol output goes to stdout; System.out is redirected to stderr so that nothing a
 * library prints can be mistaken for it.
 */
public final class RemotingInterop {
    static final int ECHO = 1000;
    static final int CALLBACK = 1001;
    static final int THROW = 1002;
    static final int ONEWAY_LOG = 1003;
    static final int INSPECT = 1004;
    static final int CLIENT_CALLBACK = 2001;
    static final int CLIENT_NOTIFY = 2002;
    static final int UNKNOWN = 9999;

    static final int SUCCESS = 0;
    static final int SYSTEM_ERROR = 1;
    static final int REQUEST_CODE_NOT_SUPPORTED = 3;

    static final String TRICKY = "\u00fc\u2713\ud83d\ude80 tab\t nl\n quote\" backslash\\ ctl\u0001\u001f";

    private static PrintStream out;

    private RemotingInterop() {
    }

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        // The server's TLS sniffing handler would try to build a self-signed certificate.
        System.setProperty("tls.server.mode", "disabled");
        if (args.length == 0) {
            usage();
        }
        switch (args[0]) {
            case "server":
                runServer();
                break;
            case "client":
                if (args.length != 4) {
                    usage();
                }
                runClient(args[1], Integer.parseInt(args[2]), args[3]);
                break;
            case "encode":
                runEncode();
                break;
            case "decode":
                runDecode();
                break;
            case "store-write":
            case "store-read":
            case "store-hold":
                if (args.length < (args[0].equals("store-write") ? 3 : 2)) {
                    usage();
                }
                StoreInterop.main(out, args);
                break;
            default:
                usage();
        }
        out.flush();
        System.exit(0);
    }

    private static void usage() {
        System.err.println("usage: server | client HOST:PORT N JSON|ROCKETMQ | encode | decode"
            + " | store-write DIR N [k=v...] | store-read DIR [k=v...] | store-hold DIR [k=v...]");
        System.exit(2);
    }

    private static void emit(Object json) {
        out.println(Json.write(json));
        out.flush();
    }

    // ------------------------------------------------------------------------------ helpers

    abstract static class Processor implements NettyRequestProcessor {
        @Override
        public boolean rejectRequest() {
            return false;
        }
    }

    static String ext(RemotingCommand cmd, String key) {
        Map<String, String> ext = cmd.getExtFields();
        return ext == null ? null : ext.get(key);
    }

    static Map<String, String> extOrEmpty(RemotingCommand cmd) {
        return cmd.getExtFields() == null ? Collections.emptyMap() : cmd.getExtFields();
    }

    static boolean sameBody(byte[] a, byte[] b) {
        byte[] x = a == null ? new byte[0] : a;
        byte[] y = b == null ? new byte[0] : b;
        return Arrays.equals(x, y);
    }

    static byte[] reversed(byte[] body) {
        if (body == null) {
            return null;
        }
        byte[] r = new byte[body.length];
        for (int i = 0; i < body.length; i++) {
            r[i] = body[body.length - 1 - i];
        }
        return r;
    }

    /** The frame NettyEncoder writes for cmd: fastEncodeHeader plus the body. */
    static byte[] wireBytes(RemotingCommand cmd) {
        ByteBuf buf = Unpooled.buffer();
        try {
            cmd.fastEncodeHeader(buf);
            if (cmd.getBody() != null) {
                buf.writeBytes(cmd.getBody());
            }
            byte[] bytes = new byte[buf.readableBytes()];
            buf.readBytes(bytes);
            return bytes;
        } finally {
            buf.release();
        }
    }

    static byte[] encodeBytes(RemotingCommand cmd) {
        ByteBuffer bb = cmd.encode();
        byte[] bytes = new byte[bb.remaining()];
        bb.get(bytes);
        return bytes;
    }

    /** A command's fields as the tests compare them; ext as [key, value] pairs in map order. */
    static Map<String, Object> describe(RemotingCommand cmd) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("code", cmd.getCode());
        m.put("language", cmd.getLanguage() == null ? null : cmd.getLanguage().name());
        m.put("language_code", cmd.getLanguage() == null ? null : (int) cmd.getLanguage().getCode());
        m.put("version", cmd.getVersion());
        m.put("opaque", cmd.getOpaque());
        m.put("flag", cmd.getFlag());
        m.put("remark", cmd.getRemark());
        List<Object> pairs = null;
        if (cmd.getExtFields() != null) {
            pairs = new ArrayList<>();
            for (Map.Entry<String, String> e : cmd.getExtFields().entrySet()) {
                pairs.add(Arrays.asList(e.getKey(), e.getValue()));
            }
        }
        m.put("ext", pairs);
        m.put("body_hex", cmd.getBody() == null ? null : Hex.encode(cmd.getBody()));
        m.put("serialize", cmd.getSerializeTypeCurrentRPC().name());
        return m;
    }

    // ------------------------------------------------------------------------------- server

    private static void runServer() throws Exception {
        NettyServerConfig config = new NettyServerConfig();
        config.setListenPort(0);  // ephemeral; 4.9.8 binds the wildcard address, not configurable
        config.setServerChannelMaxIdleTimeSeconds(600);
        final NettyRemotingServer server = new NettyRemotingServer(config);
        ExecutorService pool = Executors.newFixedThreadPool(16);
        ExecutorService callbacks = Executors.newFixedThreadPool(8);
        final Map<String, Boolean> onewaySeen = new ConcurrentHashMap<>();

        server.registerProcessor(ECHO, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req) {
                if (req.isOnewayRPC()) {
                    onewaySeen.put(Objects.toString(ext(req, "id"), ""), Boolean.TRUE);
                    return null;
                }
                RemotingCommand resp = RemotingCommand.createResponseCommand(SUCCESS, req.getRemark());
                if (req.getExtFields() != null) {
                    resp.setExtFields(new HashMap<>(req.getExtFields()));
                }
                resp.setBody(req.getBody());
                return resp;
            }
        }, pool);

        server.registerProcessor(CALLBACK, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req)
                throws Exception {
                String ser = Objects.toString(ext(req, "callbackSerialize"), "JSON");
                String notify = ext(req, "notify");
                if (notify != null) {
                    RemotingCommand n = RemotingCommand.createRequestCommand(CLIENT_NOTIFY, null);
                    n.setSerializeTypeCurrentRPC(SerializeType.valueOf(ser));
                    n.addExtField("id", notify);
                    server.invokeOneway(ctx.channel(), n, 3000);
                }
                RemotingCommand cb = RemotingCommand.createRequestCommand(CLIENT_CALLBACK, null);
                cb.setSerializeTypeCurrentRPC(SerializeType.valueOf(ser));
                cb.addExtField("ping", ext(req, "ping"));
                cb.setBody(req.getBody());
                RemotingCommand r = server.invokeSync(ctx.channel(), cb, 5000);
                RemotingCommand resp = RemotingCommand.createResponseCommand(SUCCESS, null);
                resp.addExtField("callbackCode", Integer.toString(r.getCode()));
                resp.addExtField("callbackOpaqueMatch", Boolean.toString(r.getOpaque() == cb.getOpaque()));
                resp.addExtField("callbackFlag", Integer.toString(r.getFlag()));
                resp.addExtField("callbackSerialize", r.getSerializeTypeCurrentRPC().name());
                resp.addExtField("callbackLanguage", String.valueOf(r.getLanguage()));
                resp.addExtField("callbackRemark", Objects.toString(r.getRemark(), "<null>"));
                resp.addExtField("pong", Objects.toString(ext(r, "pong"), "<null>"));
                resp.setBody(r.getBody());
                return resp;
            }
        }, callbacks);

        server.registerProcessor(THROW, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req) {
                throw new IllegalStateException("interop boom \u00fc");
            }
        }, pool);

        server.registerProcessor(ONEWAY_LOG, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req) {
                String prefix = Objects.toString(ext(req, "prefix"), "");
                List<Object> ids = new ArrayList<>();
                for (String id : onewaySeen.keySet()) {
                    if (id.startsWith(prefix)) {
                        ids.add(id);
                    }
                }
                RemotingCommand resp = RemotingCommand.createResponseCommand(SUCCESS, null);
                resp.setBody(Json.write(ids).getBytes(StandardCharsets.UTF_8));
                return resp;
            }
        }, pool);

        server.registerProcessor(INSPECT, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req) {
                RemotingCommand resp = RemotingCommand.createResponseCommand(SUCCESS, null);
                resp.setBody(Json.write(describe(req)).getBytes(StandardCharsets.UTF_8));
                return resp;
            }
        }, pool);

        server.start();
        out.println("ready port=" + server.localListenPort());
        out.flush();
        // Runs until the test closes stdin (or kills the process).
        byte[] buf = new byte[256];
        InputStream in = System.in;
        while (in.read(buf) != -1) {
            // discard
        }
        server.shutdown();
        pool.shutdownNow();
        callbacks.shutdownNow();
    }

    // ------------------------------------------------------------------------------- client

    /** A client that counts responses which match no request (e.g. an answer to a oneway). */
    static final class CountingClient extends NettyRemotingClient {
        final AtomicInteger unmatched = new AtomicInteger();

        CountingClient(NettyClientConfig config) {
            super(config);
        }

        @Override
        public void processResponseCommand(ChannelHandlerContext ctx, RemotingCommand cmd) {
            if (!responseTable.containsKey(cmd.getOpaque())) {
                unmatched.incrementAndGet();
            }
            super.processResponseCommand(ctx, cmd);
        }
    }

    static final class Checker {
        final List<String> errors = Collections.synchronizedList(new ArrayList<>());
        final AtomicInteger failures = new AtomicInteger();
        final SerializeType expected;

        Checker(SerializeType expected) {
            this.expected = expected;
        }

        void fail(String what) {
            failures.incrementAndGet();
            if (errors.size() < 20) {
                errors.add(what);
            }
        }

        boolean echo(String what, RemotingCommand req, RemotingCommand resp) {
            if (resp == null) {
                fail(what + ": no response");
                return false;
            }
            List<String> bad = new ArrayList<>();
            if (resp.getCode() != SUCCESS) {
                bad.add("code " + resp.getCode() + " remark " + resp.getRemark());
            }
            if (resp.getOpaque() != req.getOpaque()) {
                bad.add("opaque " + resp.getOpaque() + " != " + req.getOpaque());
            }
            if (!resp.isResponseType() || resp.isOnewayRPC()) {
                bad.add("flag " + resp.getFlag());
            }
            if (!extOrEmpty(resp).equals(extOrEmpty(req))) {
                bad.add("ext " + extOrEmpty(resp) + " != " + extOrEmpty(req));
            }
            if (!Objects.equals(resp.getRemark(), req.getRemark())) {
                bad.add("remark " + resp.getRemark() + " != " + req.getRemark());
            }
            if (!sameBody(resp.getBody(), req.getBody())) {
                bad.add("body differs");
            }
            if (resp.getSerializeTypeCurrentRPC() != expected) {
                bad.add("serialize " + resp.getSerializeTypeCurrentRPC());
            }
            if (!bad.isEmpty()) {
                fail(what + ": " + String.join("; ", bad));
                return false;
            }
            return true;
        }
    }

    static RemotingCommand echoRequest(String kind, int i, SerializeType ser) {
        RemotingCommand req = RemotingCommand.createRequestCommand(ECHO, null);
        req.setSerializeTypeCurrentRPC(ser);
        if (i % 7 != 3) {  // some requests without any extFields
            req.addExtField("seq", Integer.toString(i));
            req.addExtField("kind", kind);
            if (i % 2 == 0) {
                req.addExtField("tricky", TRICKY);
                req.addExtField("\u043a\u043b\u044e\u0447", "\u0437\u043d\u0430\u0447\u0435\u043d\u0438\u0435");
            }
        }
        if (i % 5 == 1) {
            req.setRemark("remark " + i + " " + TRICKY);
        }
        if (i % 4 != 0) {
            byte[] body = new byte[(i * 37) % 1500 + 1];
            for (int j = 0; j < body.length; j++) {
                body[j] = (byte) (i + j);
            }
            req.setBody(body);
        }
        return req;
    }

    private static void runClient(String addr, int n, String serName) throws Exception {
        // Set before RemotingCommand is first loaded: its static initializer reads it, as a
        // Java client started with -Drocketmq.serialize.type=... would.
        System.setProperty(RemotingCommand.SERIALIZE_TYPE_PROPERTY, serName);
        final SerializeType ser = SerializeType.valueOf(serName);
        long started = System.nanoTime();
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("mode", "client");
        summary.put("serialize", serName);
        summary.put("configured_serialize", RemotingCommand.getSerializeTypeConfigInThisServer().name());

        final Checker check = new Checker(ser);
        final CountingClient client = new CountingClient(new NettyClientConfig());
        ExecutorService pool = Executors.newFixedThreadPool(4);
        final List<Object> callbackSeen = Collections.synchronizedList(new ArrayList<>());
        final List<Object> notifySeen = Collections.synchronizedList(new ArrayList<>());
        client.registerProcessor(CLIENT_CALLBACK, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req) {
                callbackSeen.add(describe(req));
                RemotingCommand resp = RemotingCommand.createResponseCommand(SUCCESS, "pong \u2713");
                resp.addExtField("pong", Objects.toString(ext(req, "ping"), "<null>"));
                resp.setBody(reversed(req.getBody()));
                return resp;
            }
        }, pool);
        client.registerProcessor(CLIENT_NOTIFY, new Processor() {
            @Override
            public RemotingCommand processRequest(ChannelHandlerContext ctx, RemotingCommand req) {
                notifySeen.add(describe(req));
                return null;
            }
        }, pool);
        client.start();
        try {
            // sync
            int syncOk = 0;
            for (int i = 0; i < n; i++) {
                RemotingCommand req = echoRequest("sync", i, ser);
                try {
                    if (check.echo("sync " + i, req, client.invokeSync(addr, req, 10000))) {
                        syncOk++;
                    }
                } catch (Exception e) {
                    check.fail("sync " + i + ": " + e);
                }
            }
            summary.put("sync_ok", syncOk);

            // async
            final AtomicInteger asyncOk = new AtomicInteger();
            final CountDownLatch done = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                final int seq = i;
                final RemotingCommand req = echoRequest("async", i, ser);
                try {
                    client.invokeAsync(addr, req, 10000, f -> {
                        try {
                            if (!f.isSendRequestOK() || f.getResponseCommand() == null) {
                                check.fail("async " + seq + ": " + f.getCause());
                            } else if (check.echo("async " + seq, req, f.getResponseCommand())) {
                                asyncOk.incrementAndGet();
                            }
                        } finally {
                            done.countDown();
                        }
                    });
                } catch (Exception e) {
                    check.fail("async " + seq + ": " + e);
                    done.countDown();
                }
            }
            if (!done.await(60, TimeUnit.SECONDS)) {
                check.fail("async: " + done.getCount() + " callbacks missing after 60 s");
            }
            summary.put("async_ok", asyncOk.get());

            // oneway
            List<Object> onewayIds = new ArrayList<>();
            int oneways = Math.min(n, 50);
            for (int i = 0; i < oneways; i++) {
                RemotingCommand req = echoRequest("oneway", i, ser);
                String id = "java-oneway-" + serName + "-" + i;
                req.addExtField("id", id);
                client.invokeOneway(addr, req, 5000);
                onewayIds.add(id);
            }
            summary.put("oneway_ids", onewayIds);

            // an unknown code
            RemotingCommand unknown = RemotingCommand.createRequestCommand(UNKNOWN, null);
            unknown.setSerializeTypeCurrentRPC(ser);
            RemotingCommand ur = client.invokeSync(addr, unknown, 10000);
            Map<String, Object> u = describe(ur);
            u.put("opaque_match", ur.getOpaque() == unknown.getOpaque());
            summary.put("unknown", u);

            // a handler that fails
            RemotingCommand boom = RemotingCommand.createRequestCommand(THROW, null);
            boom.setSerializeTypeCurrentRPC(ser);
            RemotingCommand br = client.invokeSync(addr, boom, 10000);
            Map<String, Object> b = describe(br);
            b.put("opaque_match", br.getOpaque() == boom.getOpaque());
            summary.put("exception", b);

            // the server calls us back over this connection
            RemotingCommand cb = RemotingCommand.createRequestCommand(CALLBACK, null);
            cb.setSerializeTypeCurrentRPC(ser);
            cb.addExtField("ping", "java-ping-" + serName + "-\u2713");
            cb.addExtField("notify", "java-notify-" + serName);
            cb.addExtField("callbackSerialize", serName);
            cb.setBody("callback body \u2713".getBytes(StandardCharsets.UTF_8));
            RemotingCommand cr = client.invokeSync(addr, cb, 10000);
            Map<String, Object> c = describe(cr);
            c.put("opaque_match", cr.getOpaque() == cb.getOpaque());
            summary.put("callback", c);
            for (int i = 0; i < 100 && notifySeen.isEmpty(); i++) {
                Thread.sleep(50);
            }
            summary.put("callback_requests_seen", new ArrayList<>(callbackSeen));
            summary.put("notify_requests_seen", new ArrayList<>(notifySeen));
        } catch (Exception e) {
            check.fail("client: " + e);
        } finally {
            Thread.sleep(200);  // let a stray answer to a oneway arrive before counting
            summary.put("unmatched_responses", client.unmatched.get());
            summary.put("failures", check.failures.get());
            summary.put("errors", new ArrayList<Object>(check.errors));
            summary.put("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
            emit(summary);
            client.shutdown();
            pool.shutdownNow();
        }
    }

    // ---------------------------------------------------------------------- encode / decode

    static final class Case {
        final String name;
        final int code;
        final int flag;
        final int opaque;
        final int version;
        final LanguageCode language;
        final String remark;
        final String[] ext;
        final byte[] body;
        Supplier<CommandCustomHeader> header;
        boolean emptyExtMap;

        Case(String name, int code, int flag, int opaque, int version, LanguageCode language,
            String remark, byte[] body, String... ext) {
            this.name = name;
            this.code = code;
            this.flag = flag;
            this.opaque = opaque;
            this.version = version;
            this.language = language;
            this.remark = remark;
            this.ext = ext;
            this.body = body;
        }

        RemotingCommand build(SerializeType ser) {
            RemotingCommand cmd = RemotingCommand.createRequestCommand(code, null);
            cmd.setFlag(flag);
            cmd.setOpaque(opaque);
            cmd.setVersion(version);
            cmd.setLanguage(language);
            cmd.setRemark(remark);
            if (header != null) {
                cmd.writeCustomHeader(header.get());
            }
            if (ext.length > 0 || emptyExtMap) {
                HashMap<String, String> map = new HashMap<>();
                for (int i = 0; i < ext.length; i += 2) {
                    map.put(ext[i], ext[i + 1]);
                }
                cmd.setExtFields(map);
            }
            cmd.setBody(body);
            cmd.setSerializeTypeCurrentRPC(ser);
            return cmd;
        }

        Case withHeader(Supplier<CommandCustomHeader> header) {
            this.header = header;
            return this;
        }

        Case withEmptyExtMap() {
            this.emptyExtMap = true;
            return this;
        }
    }

    /** A custom header written by reflection (makeCustomHeaderToNet), as most 4.9 headers are. */
    public static final class DemoHeader implements CommandCustomHeader {
        private String topic = "TopicTest";
        private Integer queueId = 3;
        private Long queueOffset = 1234567890123L;
        private Boolean unitMode = Boolean.FALSE;
        private String absent = null;
        private int primitive = -7;

        @Override
        public void checkFields() {
        }
    }

    /**
     * A header with the 4.9.x fast path (like SendMessageRequestHeaderV2): with ROCKETMQ,
     * NettyEncoder writes its fields and then the extFields map, so a key present in both goes
     * on the wire twice (the later one, from the map, is what Java reads).
     */
    public static final class DemoFastHeader implements CommandCustomHeader, FastCodesHeader {
        private String a = "pg";
        private String b = "from-fast-path";

        @Override
        public void checkFields() {
        }

        @Override
        public void encode(ByteBuf out) {
            writeIfNotNull(out, "a", a);
            writeIfNotNull(out, "b", b);
        }

        @Override
        public void decode(HashMap<String, String> fields) {
            a = fields.get("a");
            b = fields.get("b");
        }
    }

    static byte[] bytes(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    static List<Case> cases() {
        LanguageCode java = LanguageCode.JAVA;
        List<Case> cases = new ArrayList<>();
        cases.add(new Case("request_bare", 10, 0, 1, 0, java, null, null));
        cases.add(new Case("request_one_ext_body", 310, 0, 7, 409, java, null,
            "hello".getBytes(StandardCharsets.UTF_8), "a", "pg"));
        cases.add(new Case("request_send_v2", 310, 0, 123456, 409, java, null, bytes(256),
            "a", "producer-group", "b", "TopicTest", "c", "TBW102", "d", "4", "e", "1", "f", "0",
            "g", "1700000000000", "h", "0",
            "i", "KEYS\u0001k1\u0002UNIQ_KEY\u0001AC110001000018B4AAC2\u0002TAGS\u0001tagA\u0002",
            "j", "0", "k", "false", "m", "false", "n", "broker-a"));
        cases.add(new Case("request_oneway", 15, 2, 42, 409, java, null, null,
            "consumerGroup", "cg", "topic", "TopicTest", "queueId", "3", "commitOffset", "1024"));
        cases.add(new Case("response_unicode_remark", 1, 1, 99, 409, java,
            "\u9519\u8bef \u00fcn\u00efc\u00f8d\u00e9 \u2713 \ud83d\ude80", null,
            "msgId", "7F00000100002A9F0000000000000000"));
        cases.add(new Case("response_control_remark", 17, 1, -5, 409, java,
            "tab\t nl\n cr\r nul\u0000 bell\u0007 bs\b ff\f esc\u001b us\u001f del\u007f "
                + "quote\" backslash\\ slash/ lt< amp& apos' ls\u2028 ps\u2029 nel\u0085 bom\ufeff",
            new byte[0], "ctl", "\u0001\u0002\t\n"));
        cases.add(new Case("response_one_ext_plain_remark", 0, 1, 2, 409, java, "OK", null,
            "queueOffset", "17"));
        cases.add(new Case("response_empty_remark", 0, 1, 3, 0, java, "", null));
        cases.add(new Case("ext_non_ascii_key", 0, 1, 4, 409, java, null, null,
            "\u043a\u043b\u044e\u0447", "\u0437\u043d\u0430\u0447\u0435\u043d\u0438\u0435 \ud83d\ude80"));
        cases.add(new Case("ext_empty_value", 34, 0, 5, 409, java, null, null, "k", ""));
        cases.add(new Case("extremes", 32767, 0x7FFFFFFF, Integer.MIN_VALUE, 32767, LanguageCode.RUST,
            "r", bytes(1), "x", "y"));
        cases.add(new Case("negative_code_version", -1, 1, -1, -2, LanguageCode.GO, null, null));
        cases.add(new Case("other_languages_cpp", 11, 0, 2147483647, 333, LanguageCode.CPP, null,
            null, "consumerGroup", "g"));
        cases.add(new Case("large_body", 310, 0, 77, 409, java, null, bytes(70000), "b", "T"));
        String[] many = new String[40];
        for (int i = 0; i < 20; i++) {
            many[2 * i] = "field" + i;
            many[2 * i + 1] = "value-" + i + "-\u00e9";
        }
        cases.add(new Case("many_ext_fields", 105, 0, 8, 409, java, null, null, many));
        cases.add(new Case("ext_empty_map", 0, 1, 10, 409, java, null, null).withEmptyExtMap());
        cases.add(new Case("custom_header", 30, 0, 11, 409, java, null, null).withHeader(DemoHeader::new));
        cases.add(new Case("fast_codes_header", 310, 0, 12, 409, java, null, null,
            "b", "from-map", "z", "extra").withHeader(DemoFastHeader::new));
        return cases;
    }

    private static void runEncode() {
        for (SerializeType ser : new SerializeType[] {SerializeType.JSON, SerializeType.ROCKETMQ}) {
            List<Case> cases = new ArrayList<>(cases());
            if (ser == SerializeType.JSON) {
                // Only JSON can carry a code above 32767 (5.x pop codes).
                cases.add(new Case("json_big_code", 200050, 0, 9, 409, LanguageCode.JAVA, null, null,
                    "consumerGroup", "g"));
            }
            for (Case c : cases) {
                RemotingCommand cmd = c.build(ser);
                byte[] wire = wireBytes(cmd);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("name", c.name);
                // After encoding: a reflected custom header has been copied into extFields.
                m.putAll(describe(cmd));
                m.put("fast_header", cmd.readCustomHeader() instanceof FastCodesHeader);
                m.put("encode_hex", Hex.encode(encodeBytes(c.build(ser))));
                m.put("wire_hex", Hex.encode(wire));
                // How Java itself reads the frame back (e.g. a zero-length ROCKETMQ string is null).
                Map<String, Object> decoded;
                try {
                    decoded = describe(RemotingCommand.decode(Arrays.copyOfRange(wire, 4, wire.length)));
                } catch (Exception e) {
                    decoded = new LinkedHashMap<>();
                    decoded.put("error", e.toString());
                }
                m.put("java_decoded", decoded);
                emit(m);
            }
        }
    }

    private static void runDecode() throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        int lines = 0;
        while ((line = in.readLine()) != null && lines < 100_000) {
            lines++;
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            try {
                byte[] frame = Hex.decode(line);
                int length = ByteBuffer.wrap(frame).getInt();
                if (length != frame.length - 4) {
                    throw new IllegalArgumentException("length field " + length + " but " + (frame.length - 4)
                        + " bytes follow");
                }
                // What NettyDecoder does: strip the length field, then RemotingCommand.decode.
                RemotingCommand cmd = RemotingCommand.decode(Arrays.copyOfRange(frame, 4, frame.length));
                m.putAll(describe(cmd));
                m.put("wire_hex", Hex.encode(wireBytes(cmd)));
            } catch (Exception e) {
                m.put("error", e.toString());
            }
            emit(m);
        }
    }

    // --------------------------------------------------------------------------- hex, json

    static final class Hex {
        private static final char[] DIGITS = "0123456789abcdef".toCharArray();

        static String encode(byte[] bytes) {
            char[] out = new char[bytes.length * 2];
            for (int i = 0; i < bytes.length; i++) {
                out[2 * i] = DIGITS[(bytes[i] >> 4) & 0xF];
                out[2 * i + 1] = DIGITS[bytes[i] & 0xF];
            }
            return new String(out);
        }

        static byte[] decode(String hex) {
            if (hex.length() % 2 != 0) {
                throw new IllegalArgumentException("odd hex length");
            }
            byte[] out = new byte[hex.length() / 2];
            for (int i = 0; i < out.length; i++) {
                out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            }
            return out;
        }
    }

    /** A minimal JSON writer: everything outside printable ASCII is escaped as \\uXXXX. */
    static final class Json {
        static String write(Object value) {
            StringBuilder sb = new StringBuilder();
            write(sb, value);
            return sb.toString();
        }

        static void write(StringBuilder sb, Object value) {
            if (value == null) {
                sb.append("null");
            } else if (value instanceof String) {
                string(sb, (String) value);
            } else if (value instanceof Number || value instanceof Boolean) {
                sb.append(value);
            } else if (value instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (value instanceof List) {
                sb.append('[');
                boolean first = true;
                for (Object o : (List<?>) value) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    write(sb, o);
                }
                sb.append(']');
            } else {
                string(sb, value.toString());
            }
        }

        static void string(StringBuilder sb, String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                if (ch == '"' || ch == '\\') {
                    sb.append('\\').append(ch);
                } else if (ch >= 0x20 && ch < 0x7F) {
                    sb.append(ch);
                } else {
                    sb.append(String.format("\\u%04x", (int) ch));
                }
            }
            sb.append('"');
        }
    }
}
