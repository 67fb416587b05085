"""Iteration orders of Java's hash collections, against what Java itself printed.

``codec.hashing`` predicts the order in which a Java 17 ``Properties`` (a
``ConcurrentHashMap`` inside), a ``HashMap`` / ``HashSet`` of strings and one of RocketMQ
``MessageQueue`` keys iterate, for mqadmin to print what Apache's prints. The expected data
below (``JAVA_OUTPUT``) is what OpenJDK 17.0.15 printed, running ``JAVA_PROGRAM`` with Apache's
rocketmq-common 4.9.7 (its ``MessageQueue``) on the cases ``java_input()`` lists: Properties
loaded from ``key=v`` lines, HashMaps of those keys, MessageQueue hash codes, HashSets of a
topic's queues over 1-3 brokers, HashMaps merged by ``putAll`` per broker (as the admin merges
offset tables), and a ``new HashMap<>()``'s table after one ``putAll``. Java is not needed
to run the tests. To regenerate (a case added, a JDK to check)::

    python -m tests.codec.test_java_orders program > /tmp/JavaOrders.java
    python -m tests.codec.test_java_orders input \\
      | java --add-opens java.base/java.util=ALL-UNNAMED -cp \\
        ~/.m2/repository/org/apache/rocketmq/rocketmq-common/4.9.7/rocketmq-common-4.9.7.jar \\
        /tmp/JavaOrders.java | python -m tests.codec.test_java_orders expect

and put what the last prints in place of ``JAVA_OUTPUT``. Orders are given as the positions of
the keys among the distinct keys in insertion order; those of more than 400 keys as a digest.
"""

from __future__ import annotations

import hashlib
import itertools
import sys
import textwrap
from collections.abc import Callable

import pytest

from codec.hashing import (
    java_hash,
    java_hashmap_order,
    java_hashmap_order_by,
    java_properties_order,
    java_putall_capacity,
    message_queue_hash,
)

JAVA_PROGRAM = """\
import java.io.*;
import java.lang.reflect.Field;
import java.util.*;
import org.apache.rocketmq.common.message.MessageQueue;

public class JavaOrders {  // one line out per line in, tab-separated
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        Field table = HashMap.class.getDeclaredField("table");
        table.setAccessible(true);  // --add-opens java.base/java.util=ALL-UNNAMED
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\\t", -1);
            List<Object> keys = new ArrayList<>();
            if (f[0].equals("P")) {  // P key...: Properties.load of key=v lines
                StringBuilder body = new StringBuilder();
                for (int i = 1; i < f.length; i++) body.append(f[i]).append("=v\\n");
                Properties p = new Properties();
                p.load(new StringReader(body.toString()));
                keys.addAll(p.keySet());
            } else if (f[0].equals("H")) {  // H key...: HashMap puts
                Map<String, Integer> m = new HashMap<>();
                for (int i = 1; i < f.length; i++) m.put(f[i], i);
                keys.addAll(m.keySet());
            } else if (f[0].equals("Q")) {  // Q topic broker queueId: hashCode
                keys.add(new MessageQueue(f[1], f[2], Integer.parseInt(f[3])).hashCode());
            } else if (f[0].equals("C")) {  // C size: table of a new HashMap after putAll
                Map<Integer, Integer> one = new HashMap<>(), all = new HashMap<>();
                for (int i = 0; i < Integer.parseInt(f[1]); i++) one.put(i, i);
                all.putAll(one);
                keys.add(((Object[]) table.get(all)).length);
            } else {  // S|M topic queues broker...: a HashSet, or a HashMap putAll per broker
                Set<MessageQueue> set = new HashSet<>();
                Map<MessageQueue, Long> all = new HashMap<>();
                for (int i = 3; i < f.length; i++) {
                    Map<MessageQueue, Long> one = new HashMap<>();
                    for (int q = 0; q < Integer.parseInt(f[2]); q++) {
                        set.add(new MessageQueue(f[1], f[i], q));
                        one.put(new MessageQueue(f[1], f[i], q), 0L);
                    }
                    all.putAll(one);
                }
                for (MessageQueue mq : f[0].equals("S") ? set : all.keySet())
                    keys.add(mq.getBrokerName() + ":" + mq.getQueueId());
            }
            StringJoiner j = new StringJoiner("\\t");
            for (Object k : keys) j.add(String.valueOf(k));
            out.println(j);
        }
    }
}
"""

# The fields of RocketMQ 4.9.7's BrokerConfig, NettyServerConfig, NettyClientConfig and
# MessageStoreConfig in declaration order: the names of a broker's config (two are repeated).
_CONFIG_FIELDS = """
rocketmqHome namesrvAddr brokerIP1 brokerIP2 brokerName brokerClusterName brokerId
brokerPermission defaultTopicQueueNums autoCreateTopicEnable clusterTopicEnable
brokerTopicEnable autoCreateSubscriptionGroup messageStorePlugIn msgTraceTopicName
traceTopicEnable sendMessageThreadPoolNums putMessageFutureThreadPoolNums
pullMessageThreadPoolNums processReplyMessageThreadPoolNums queryMessageThreadPoolNums
adminBrokerThreadPoolNums clientManageThreadPoolNums consumerManageThreadPoolNums
heartbeatThreadPoolNums endTransactionThreadPoolNums flushConsumerOffsetInterval
flushConsumerOffsetHistoryInterval rejectTransactionMessage fetchNamesrvAddrByAddressServer
sendThreadPoolQueueCapacity putThreadPoolQueueCapacity pullThreadPoolQueueCapacity
replyThreadPoolQueueCapacity queryThreadPoolQueueCapacity clientManagerThreadPoolQueueCapacity
consumerManagerThreadPoolQueueCapacity heartbeatThreadPoolQueueCapacity
endTransactionPoolQueueCapacity filterServerNums longPollingEnable shortPollingTimeMills
notifyConsumerIdsChangedEnable highSpeedMode commercialEnable commercialTimerCount
commercialTransCount commercialBigCount commercialBaseCount transferMsgByHeap maxDelayTime
regionId registerBrokerTimeoutMills slaveReadEnable disableConsumeIfConsumerReadSlowly
consumerFallbehindThreshold brokerFastFailureEnable waitTimeMillsInSendQueue
waitTimeMillsInPullQueue waitTimeMillsInHeartbeatQueue waitTimeMillsInTransactionQueue
startAcceptSendRequestTimeStamp traceOn enableCalcFilterBitMap expectConsumerNumUseFilter
maxErrorRateOfBloomFilter filterDataCleanTimeSpan filterSupportRetry enablePropertyFilter
compressedRegister forceRegister registerNameServerPeriod transactionTimeOut
transactionCheckMax transactionCheckInterval aclEnable storeReplyMessageEnable enableDetailStat
autoDeleteUnusedStats isolateLogEnable listenPort serverWorkerThreads
serverCallbackExecutorThreads serverSelectorThreads serverOnewaySemaphoreValue
serverAsyncSemaphoreValue serverChannelMaxIdleTimeSeconds serverSocketSndBufSize
serverSocketRcvBufSize writeBufferHighWaterMark writeBufferLowWaterMark serverSocketBacklog
serverPooledByteBufAllocatorEnable useEpollNativeSelector clientWorkerThreads
clientCallbackExecutorThreads clientOnewaySemaphoreValue clientAsyncSemaphoreValue
connectTimeoutMillis channelNotActiveInterval clientChannelMaxIdleTimeSeconds
clientSocketSndBufSize clientSocketRcvBufSize clientPooledByteBufAllocatorEnable
clientCloseSocketIfTimeout useTLS writeBufferHighWaterMark writeBufferLowWaterMark
storePathRootDir storePathCommitLog storePathDLedgerCommitLog readOnlyCommitLogStorePaths
mappedFileSizeCommitLog mappedFileSizeConsumeQueue enableConsumeQueueExt
mappedFileSizeConsumeQueueExt bitMapLengthConsumeQueueExt flushIntervalCommitLog
commitIntervalCommitLog useReentrantLockWhenPutMessage flushCommitLogTimed
flushIntervalConsumeQueue cleanResourceInterval deleteCommitLogFilesInterval
deleteConsumeQueueFilesInterval destroyMapedFileIntervalForcibly redeleteHangedFileInterval
deleteWhen diskMaxUsedSpaceRatio fileReservedTime putMsgIndexHightWater maxMessageSize
checkCRCOnRecover flushCommitLogLeastPages commitCommitLogLeastPages
flushLeastPagesWhenWarmMapedFile flushConsumeQueueLeastPages flushCommitLogThoroughInterval
commitCommitLogThoroughInterval flushConsumeQueueThoroughInterval
maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInMemory
maxTransferBytesOnMessageInDisk maxTransferCountOnMessageInDisk accessMessageInMemoryMaxRatio
messageIndexEnable maxHashSlotNum maxIndexNum maxMsgsNumBatch messageIndexSafe haListenPort
haSendHeartbeatInterval haHousekeepingInterval haTransferBatchSize haMasterAddress
haSlaveFallbehindMax brokerRole flushDiskType syncFlushTimeout slaveTimeout messageDelayLevel
flushDelayOffsetInterval cleanFileForciblyEnable warmMapedFileEnable offsetCheckInSlave
debugLockEnable duplicationEnable diskFallRecorded osPageCacheBusyTimeOutMills
defaultQueryMaxNum transientStorePoolEnable transientStorePoolSize
fastFailIfNoBufferInStorePool enableDLegerCommitLog dLegerGroup dLegerPeers dLegerSelfId
preferredLeaderId isEnableBatchPush enableScheduleMessageStats enableLmq enableMultiDispatch
maxLmqConsumeQueueNum enableScheduleAsyncDeliver scheduleAsyncDeliverMaxPendingLimit
scheduleAsyncDeliverMaxResendNum2Blocked
"""
CONFIG_NAMES: list[str] = _CONFIG_FIELDS.split()


def _words(count: int, seed: int, max_length: int) -> list[str]:
    """``count`` pseudo-random lower-case words of 1 .. ``max_length`` letters (a 64-bit LCG,
    so the cases never change); short ones repeat."""
    x, words = seed, []
    for _ in range(count):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        length = 1 + (x >> 40) % max_length
        letters = []
        for _ in range(length):
            x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
            letters.append(chr(ord("a") + (x >> 33) % 26))
        words.append("".join(letters))
    return words


def _same_hash(pairs: int) -> list[str]:
    """The 2^pairs strings of ``pairs`` times "Aa" or "BB": all of one ``hashCode``."""
    return ["".join(p) for p in itertools.product(("Aa", "BB"), repeat=pairs)]


def _low_bits_equal(count: int, bits: int) -> list[str]:
    """``count`` keys whose spread hashes agree in the low ``bits`` bits (one bin until the
    table outgrows 2^bits) and differ above."""
    keys = []
    for i in itertools.count():
        h = java_hash(f"key{i}") & 0xFFFFFFFF
        if not (h ^ (h >> 16)) & ((1 << bits) - 1):
            keys.append(f"key{i}")
            if len(keys) == count:
                return keys
    raise AssertionError  # pragma: no cover


# name -> keys, each put in this order into a Properties and a HashMap
KEY_CASES: dict[str, list[str]] = {
    **{f"config{n}": CONFIG_NAMES[:n] for n in (5, 11, 12, 13, 25, 60, 150)},
    "config": CONFIG_NAMES,
    "config_reversed": CONFIG_NAMES[::-1],
    "config_sorted": sorted(CONFIG_NAMES),
    **{f"words{n}": _words(n, n, 12) for n in (5, 11, 12, 13, 24, 25, 48, 60, 150, 300, 2000)},
    "short_words": _words(5000, 7, 3),  # repeats: a key put again stays where it is
    "same_hash8": _same_hash(3),
    "same_hash9": _same_hash(4)[:9],  # a 9th key in a bin: the table grows
    "same_hash10_among_words": [*_words(20, 1, 8), *_same_hash(4)[:10], *_words(20, 2, 8)],
    "same_hash16": _same_hash(4),  # Properties: a TreeBin from the 10th key on
    "same_hash64_among_words": [
        k for pair in zip(_words(64, 3, 10), _same_hash(6), strict=True) for k in pair
    ],
    "low4_bits12": _low_bits_equal(12, 4),
    "low6_bits9": _low_bits_equal(9, 6),
    "low6_bits8_among_words": [*_low_bits_equal(8, 6), *_words(40, 4, 10)],
    "low7_bits40": _low_bits_equal(40, 7),
    "low10_bits30": _low_bits_equal(30, 10),
    "non_ascii": ["größe", "名前", "ключ", "emoji😀", "naïve", "brokerName", "Ω", "日本語"],
}
# A HashMap treeifies a bin of 9+ keys in a table of 64+ and then iterates it from the
# tree's root: not simulated (java_hashmap_order_by's docstring). These cases get there (the
# two among words by a word landing in the crowded bin); low4_bits12 grows the table at its
# 9th key and is simulated.
HASHMAP_UNSIMULATED = {
    "same_hash10_among_words",
    "same_hash16",
    "same_hash64_among_words",
    "low6_bits8_among_words",
    "low7_bits40",
    "low10_bits30",
}

TOPICS = ["TopicTest", "%RETRY%please_rename_unique_group_name_4", "SCHEDULE_TOPIC_XXXX"]
HASH_TOPICS = [*TOPICS, "rmq_sys_TRACE_DATA_DefaultRegion", "订单主题"]
BROKERS = ["broker-a", "broker-b", "broker-c"]
HASH_BROKERS = [*BROKERS, "DefaultCluster-broker-0"]
QUEUE_IDS = (0, 1, 7, 15, 1023)
# (topic, queues per broker, brokers): a HashSet of all, a HashMap putAll per broker
SET_CASES = [(t, n, b) for t in TOPICS for n in (4, 8, 16) for b in (1, 2, 3)]
MERGE_CASES = [(t, n, b) for t in TOPICS[:2] for n in (1, 3, 4, 8, 12, 16, 24) for b in (1, 2, 3)]
PUTALL_SIZES = range(1, 201)


def java_input() -> list[str]:
    """The lines ``JAVA_PROGRAM`` reads, in the order of ``JAVA_OUTPUT``'s entries."""
    lines = [f"P\t{chr(9).join(keys)}" for keys in KEY_CASES.values()]
    lines += [f"H\t{chr(9).join(keys)}" for keys in KEY_CASES.values()]
    lines += [f"Q\t{t}\t{b}\t{q}" for t in HASH_TOPICS for b in HASH_BROKERS for q in QUEUE_IDS]
    lines += [f"S\t{t}\t{n}\t{chr(9).join(BROKERS[:b])}" for t, n, b in SET_CASES]
    lines += [f"M\t{t}\t{n}\t{chr(9).join(BROKERS[:b])}" for t, n, b in MERGE_CASES]
    lines += [f"C\t{s}" for s in PUTALL_SIZES]
    return lines


def _encode(order: list[str], keys: list[str]) -> str:
    """An order as the positions of its keys among ``keys`` (a digest beyond 400 keys)."""
    if len(keys) > 400:
        return "sha256:" + hashlib.sha256("\t".join(order).encode()).hexdigest()[:32]
    position = {k: i for i, k in enumerate(keys)}
    return " ".join(str(position[k]) for k in order)


def _queues(n: int, brokers: int) -> list[str]:
    """A topic's queues as Java printed them, brokers in turn, queue ids from 0."""
    return [f"{b}:{q}" for b in BROKERS[:brokers] for q in range(n)]


def _expectations(java_lines: list[str]) -> dict[str, list[str]]:
    """``JAVA_OUTPUT`` from what ``JAVA_PROGRAM`` printed for ``java_input()``."""
    rows = iter(line.rstrip("\n").split("\t") for line in java_lines)
    distinct = {name: list(dict.fromkeys(keys)) for name, keys in KEY_CASES.items()}
    return {
        "properties": [_encode(next(rows), distinct[name]) for name in KEY_CASES],
        "hashmap": [_encode(next(rows), distinct[name]) for name in KEY_CASES],
        "mq_hash": [
            " ".join(
                next(rows)[0] for _ in range(len(HASH_TOPICS) * len(HASH_BROKERS) * len(QUEUE_IDS))
            )
        ],
        "set": [_encode(next(rows), _queues(n, b)) for _, n, b in SET_CASES],
        "merge": [_encode(next(rows), _queues(n, b)) for _, n, b in MERGE_CASES],
        "putall": [" ".join(next(rows)[0] for _ in PUTALL_SIZES)],
    }


def _literal(expectations: dict[str, list[str]]) -> str:
    """``JAVA_OUTPUT``'s source, its strings cut into pieces (at spaces) that fit lines."""
    out = ["JAVA_OUTPUT: dict[str, list[str]] = {"]
    for key, values in expectations.items():
        out.append(f"    {key!r}: [")
        for value in values:
            pieces = textwrap.wrap(value, 84, break_on_hyphens=False) or [""]
            if len(pieces) == 1:
                out.append(f'        "{value}",')
            else:
                out.append("        (")
                out.append(f'            "{pieces[0]}"')
                out.extend(f'            " {piece}"' for piece in pieces[1:])
                out.append("        ),")
        out.append("    ],")
    out.append("}")
    return "\n".join(out)


# What JAVA_PROGRAM printed (OpenJDK 17.0.15, rocketmq-common 4.9.7), through _expectations.
JAVA_OUTPUT: dict[str, list[str]] = {
    "properties": [
        "3 2 1 4 0",
        "6 3 10 2 5 7 1 9 4 0 8",
        "6 11 9 8 3 10 2 5 7 1 4 0",
        "6 11 9 8 3 10 2 5 7 1 4 0 12",
        "15 23 22 9 8 16 3 2 7 20 18 6 24 14 11 10 19 21 17 5 1 13 4 0 12",
        (
            "41 23 9 54 8 47 35 42 56 20 49 48 26 25 11 38 58 57 1 4 0 29 12 40 15 22 36 16 3 53"
            " 2 7 50 46 33 39 55 18 6 52 24 14 28 34 27 43 10 19 21 51 17 5 30 31 45 32 44 13 59"
            " 37"
        ),
        (
            "41 91 94 97 99 112 101 23 74 106 9 100 78 145 8 102 35 90 109 42 77 56 20 129 117 60"
            " 143 48 25 67 11 123 122 118 79 57 1 104 82 4 29 40 63 124 126 73 138 131 144 16 88"
            " 128 142 53 127 46 33 55 65 76 24 61 62 28 119 96 43 108 21 137 30 31 45 32 116 87"
            " 134 111 71 89 54 86 47 110 140 84 130 70 49 26 38 115 58 125 135 75 120 85 98 107"
            " 103 136 0 93 139 92 12 133 66 15 22 36 83 69 3 132 2 7 50 72 141 95 39 105 18 6 52"
            " 113 14 64 81 34 146 27 114 19 10 51 17 5 44 13 80 59 147 37 68 121"
        ),
        (
            "41 91 94 97 99 112 101 150 23 74 106 9 156 100 78 145 8 102 35 90 109 174 163 42 77"
            " 56 168 20 129 117 60 143 48 165 183 25 67 11 123 158 162 122 118 79 153 57 167 1 104"
            " 149 82 4 29 40 63 124 126 73 138 152 177 131 144 16 88 128 142 53 127 171 46 33 55"
            " 65 76 24 61 62 155 180 28 119 96 176 43 108 21 137 30 31 45 32 148 116 87 179 134"
            " 111 169 71 89 54 86 47 110 140 84 130 70 49 26 159 38 115 58 125 135 75 172 120 85"
            " 98 107 103 136 0 93 139 92 12 133 66 161 15 22 36 160 83 181 175 69 3 178 132 154 2"
            " 7 50 72 141 95 39 170 105 164 18 6 52 113 14 166 64 173 182 81 157 34 146 27 114 19"
            " 10 51 17 5 44 151 13 80 59 147 37 68 121"
        ),
        (
            "142 88 91 94 71 86 33 84 160 77 109 27 174 85 38 105 175 83 74 78 148 9 20 141 106"
            " 127 15 54 163 66 123 40 135 18 0 158 116 60 172 25 21 61 65 30 104 126 16 182 81 34"
            " 101 179 154 143 120 59 57 110 31 45 6 39 52 95 167 41 55 130 56 12 137 150 128 107"
            " 118 121 122 159 28 3 64 155 89 7 75 140 46 162 138 152 153 35 151 67 96 4 49 72 14"
            " 112 79 97 129 136 73 43 99 53 113 134 157 24 145 68 58 125 48 11 108 63 98 76 87 82"
            " 47 44 92 183 93 171 50 117 22 168 161 23 147 100 2 8 114 5 180 29 51 176 181 111 133"
            " 42 90 13 144 19 80 165 131 177 70 17 169 119 10 1 26 102 149 37 156 69 132 164 173"
            " 166 178 139 32 103 170 36 124 62 115 146"
        ),
        (
            "157 20 30 153 16 60 29 90 43 163 168 4 165 22 5 109 50 28 25 135 183 47 48 123 62 8"
            " 172 111 133 175 180 118 32 56 144 69 76 54 15 117 124 52 79 94 100 179 49 122 23 93"
            " 148 12 72 102 59 136 57 169 92 114 67 77 108 145 154 0 131 158 73 61 36 141 42 107"
            " 164 96 160 166 85 110 87 140 26 99 98 162 2 81 35 132 146 91 129 39 155 64 80 104"
            " 173 139 182 55 149 33 103 113 150 17 89 171 83 84 68 86 53 178 78 1 45 19 147 41 161"
            " 27 38 116 142 174 151 3 88 74 181 167 24 44 18 152 66 126 40 10 63 14 37 13 9 106"
            " 170 115 21 71 75 58 176 128 11 138 105 121 125 70 46 143 156 159 134 112 82 6 31 127"
            " 137 130 7 34 95 101 120 119 177 51 65 97"
        ),
        "0 2 3 1 4",
        "4 8 5 6 0 1 3 2 10 7 9",
        "2 3 0 11 10 4 9 1 8 6 5 7",
        "0 2 9 3 5 8 4 11 10 6 12 1 7",
        "12 3 14 13 16 18 15 21 4 0 2 7 9 19 6 23 20 5 22 1 11 8 10 17",
        "24 0 3 11 9 4 17 16 7 18 12 14 13 15 8 22 1 20 5 6 2 19 23 10 21",
        (
            "45 38 27 40 46 2 3 23 34 31 36 43 7 16 8 24 39 1 5 4 0 13 21 30 42 26 33 14 18 19 29"
            " 22 32 9 41 15 10 12 11 37 25 35 6 17 20 44 28"
        ),
        (
            "12 16 17 49 58 1 19 48 7 53 2 20 21 28 6 54 30 23 15 39 51 27 33 47 40 50 44 56 0 18"
            " 3 8 29 42 35 22 26 37 14 57 31 4 24 43 55 9 11 52 34 59 46 45 5 36 25 32 10 38 41 13"
        ),
        (
            "83 127 98 39 26 82 125 6 27 28 4 36 138 68 113 63 95 101 75 111 78 9 91 116 71 141 1"
            " 105 72 131 93 73 46 87 135 0 31 12 40 58 10 104 54 79 57 122 22 52 21 5 17 25 107 64"
            " 115 130 20 124 128 65 102 56 50 69 66 18 19 35 81 121 120 70 86 11 61 62 49 139 51"
            " 140 42 112 41 43 142 32 145 3 100 60 129 59 33 45 94 117 16 44 74 96 126 77 103 76"
            " 80 118 15 114 108 47 13 37 30 136 143 109 123 133 29 88 14 24 97 99 134 7 137 110"
            " 119 48 55 23 89 106 144 2 132 34 8 84 85 92 67 53 90 38"
        ),
        (
            "90 199 79 127 253 83 180 140 104 115 132 150 200 284 163 77 216 114 49 263 170 71 88"
            " 280 70 143 44 292 65 151 118 112 56 224 256 99 250 259 145 142 179 194 278 212 268"
            " 110 72 166 265 249 25 133 73 271 17 1 42 275 147 182 211 18 190 4 53 75 33 135 197"
            " 61 260 54 295 94 258 31 185 277 81 69 16 34 187 229 251 23 162 218 8 46 43 139 64"
            " 175 272 141 57 55 95 210 60 11 226 158 245 248 63 206 13 89 204 106 68 121 269 257"
            " 41 137 209 289 192 155 239 198 19 138 222 92 205 62 169 293 26 219 287 203 117 273"
            " 152 85 122 285 5 153 38 24 286 261 9 86 281 196 45 173 58 171 96 207 124 111 105 215"
            " 47 165 174 242 240 279 157 195 14 120 167 262 270 6 67 221 21 154 244 148 76 202 252"
            " 12 125 100 193 51 101 80 177 254 266 102 291 7 188 208 36 2 91 160 168 131 126 98"
            " 128 228 28 93 149 288 134 136 267 32 189 156 52 82 146 3 178 35 159 255 283 108 20"
            " 276 109 161 186 22 119 37 223 84 48 238 231 236 66 237 97 225 241 243 74 40 264 232"
            " 78 274 181 227 246 59 129 10 294 214 191 87 172 29 282 107 130 176 247 30 233 27 213"
            " 144 217 290 39 116 164 201 230 50 234 15 220 183 103 235 0 113 184 123"
        ),
        "sha256:c327ba6d9b238367f4ac84e9cd57e975",
        "sha256:e714c4051a7389d5f6a46d3ffceff382",
        "0 1 2 3 4 5 6 7",
        "0 1 2 3 4 5 6 7 8",
        (
            "40 9 30 10 17 4 47 18 41 38 31 0 43 8 35 2 46 33 45 29 28 20 21 22 23 24 25 26 27 49"
            " 3 39 6 32 19 15 48 5 34 42 14 11 36 1 44 12 16 37 13 7"
        ),
        "15 14 13 12 11 10 0 1 2 3 4 5 6 7 8 9",
        (
            "116 58 76 88 84 46 54 68 14 40 72 94 90 34 26 6 108 112 104 30 122 2 48 10 16 102"
            " 106 118 80 74 4 78 28 98 82 66 92 126 100 56 36 127 125 123 121 119 117 115 113 111"
            " 109 107 105 103 101 99 97 95 93 91 89 87 85 83 81 79 77 75 73 71 69 67 65 63 61 59"
            " 57 55 53 51 49 47 45 43 41 39 38 37 35 33 31 29 27 25 23 21 1 3 5 7 9 11 13 15 17 19"
            " 22 24 42 62 60 96 52 12 114 70 86 8 110 50 120 20 0 44 18 32 124 64"
        ),
        "0 3 6 10 4 7 5 1 8 2 9 11",
        "5 4 2 0 8 7 6 3 1",
        (
            "0 2 4 5 43 47 25 27 16 17 26 28 15 24 44 32 34 11 18 9 38 1 3 6 7 14 36 10 37 33 23"
            " 46 22 45 39 8 19 12 42 41 30 35 13 21 31 20 40 29"
        ),
        (
            "39 38 37 36 35 34 33 32 31 30 29 28 27 26 25 24 23 22 21 20 19 18 17 16 15 14 13 12"
            " 11 10 0 1 2 3 4 5 6 7 8 9"
        ),
        "29 28 27 26 25 24 23 22 21 20 19 18 17 16 15 14 13 12 11 10 0 1 2 3 4 5 6 7 8 9",
        "0 2 4 3 6 1 5 7",
    ],
    "hashmap": [
        "3 2 1 4 0",
        "6 3 10 2 5 7 1 9 4 0 8",
        "6 3 10 2 5 7 1 11 9 4 0 8",
        "6 11 9 8 3 10 2 5 7 1 4 0 12",
        "15 23 22 9 8 16 3 2 7 20 18 6 24 14 11 10 19 21 17 5 1 4 13 0 12",
        (
            "41 23 9 54 8 47 35 42 56 20 49 48 26 25 11 38 58 57 1 4 0 12 29 40 15 22 36 16 3 53"
            " 2 7 50 46 33 39 55 18 6 52 24 14 28 34 27 43 10 19 21 51 17 5 30 31 45 32 44 13 59"
            " 37"
        ),
        (
            "41 91 94 97 99 112 101 23 74 106 9 100 78 145 8 102 35 90 109 42 77 56 20 129 117 60"
            " 143 48 25 67 11 123 122 118 79 57 1 104 82 4 29 40 63 124 126 73 138 131 144 16 88"
            " 128 142 53 127 46 33 55 65 76 24 61 62 28 119 96 43 108 21 137 30 31 45 32 116 87"
            " 134 111 71 89 54 86 47 110 140 84 130 70 49 26 38 115 58 125 135 75 120 85 98 107"
            " 103 136 0 93 139 92 12 133 66 15 22 36 83 69 3 132 2 7 50 72 141 95 39 105 18 6 52"
            " 113 14 64 81 34 146 27 114 10 19 51 17 5 44 13 80 59 147 37 68 121"
        ),
        (
            "41 91 94 97 99 112 101 150 23 74 106 9 156 100 78 145 8 102 35 90 109 174 163 42 77"
            " 56 168 20 129 117 60 143 48 165 183 25 67 11 123 158 162 122 118 79 153 57 167 1 104"
            " 149 82 4 29 40 63 124 126 73 138 152 177 131 144 16 88 128 142 53 127 171 46 33 55"
            " 65 76 24 61 62 155 180 28 119 96 176 43 108 21 137 30 31 45 32 148 116 87 179 134"
            " 111 169 71 89 54 86 47 110 140 84 130 70 49 26 159 38 115 58 125 135 75 172 120 85"
            " 98 107 103 136 0 93 139 92 12 133 66 161 15 22 36 160 83 181 175 69 3 178 132 154 2"
            " 7 50 72 141 95 39 170 105 164 18 6 52 113 14 166 64 173 182 81 157 34 146 27 114 10"
            " 19 51 17 5 44 151 13 80 59 147 37 68 121"
        ),
        (
            "142 88 91 94 71 86 33 84 160 77 109 27 174 85 38 105 175 83 74 78 148 9 20 141 106"
            " 127 15 54 163 66 123 40 135 18 0 158 116 60 172 25 21 61 65 30 104 126 16 182 81 34"
            " 101 179 154 143 120 59 57 110 31 45 6 39 52 95 167 41 55 130 56 12 137 150 128 107"
            " 118 121 122 159 28 3 64 155 89 7 75 140 46 162 138 152 153 35 151 67 96 4 49 72 14"
            " 112 79 97 129 136 43 73 99 53 113 134 157 24 145 68 58 125 48 11 108 63 98 76 87 82"
            " 47 44 92 183 93 171 50 117 22 168 161 23 147 100 2 8 114 5 180 29 51 176 181 111 133"
            " 42 90 13 144 19 80 165 131 177 70 17 169 119 10 1 26 102 149 37 156 69 132 164 173"
            " 166 178 139 32 103 170 36 124 62 115 146"
        ),
        (
            "157 20 30 153 16 60 29 90 43 163 168 4 165 22 5 109 50 28 25 135 183 47 48 123 62 8"
            " 172 111 133 175 180 118 32 56 144 69 76 15 54 117 124 52 79 94 100 179 49 122 23 93"
            " 148 12 72 102 59 136 57 169 92 114 67 77 108 145 154 0 131 158 73 61 36 141 42 107"
            " 164 96 160 166 85 110 87 140 26 99 98 162 2 81 35 132 146 91 129 39 155 64 80 104"
            " 173 139 182 55 149 33 103 113 150 17 89 171 83 84 68 86 53 178 78 1 45 19 147 41 161"
            " 27 38 116 142 174 151 3 88 74 181 167 24 18 44 152 66 126 40 10 63 14 37 9 13 106"
            " 170 115 21 71 75 58 176 128 11 138 105 121 125 70 46 143 156 159 134 112 82 6 31 127"
            " 137 130 7 34 95 101 120 119 177 51 65 97"
        ),
        "0 2 3 1 4",
        "4 8 5 6 0 1 3 2 10 7 9",
        "4 2 3 9 1 0 8 11 6 10 5 7",
        "0 2 9 3 5 8 4 11 10 6 12 1 7",
        "0 12 2 3 14 7 13 9 19 6 23 16 20 5 18 22 15 1 11 21 8 10 4 17",
        "24 0 3 11 9 4 17 16 7 18 12 14 13 15 8 22 1 20 5 6 2 19 23 10 21",
        (
            "45 38 27 40 46 2 3 23 34 31 36 43 7 16 8 24 39 1 5 4 0 13 21 30 42 26 33 14 18 19 29"
            " 22 32 9 41 15 10 11 12 37 25 35 6 17 20 44 28"
        ),
        (
            "12 16 17 49 58 1 19 48 7 53 2 20 21 28 6 54 23 30 15 39 51 27 33 47 40 50 44 56 0 18"
            " 3 8 29 42 35 22 26 37 14 57 31 4 24 43 55 9 11 52 34 59 46 45 5 36 25 32 10 38 41 13"
        ),
        (
            "83 127 98 39 26 82 125 6 27 28 4 36 138 68 113 63 95 101 75 111 78 9 91 116 71 141 1"
            " 105 72 131 93 73 46 87 135 0 12 31 40 58 10 104 54 79 57 122 22 52 21 5 17 25 107 64"
            " 115 130 20 124 128 65 102 56 50 69 66 18 19 35 81 121 120 70 86 11 61 49 62 139 51"
            " 140 42 112 41 43 142 32 145 3 100 60 129 59 33 45 94 117 16 44 74 96 126 77 103 76"
            " 80 118 15 114 108 47 13 37 30 136 143 109 123 133 29 88 14 24 97 99 134 7 137 110"
            " 119 48 55 23 89 106 144 2 132 8 34 84 85 92 67 53 90 38"
        ),
        (
            "90 199 79 127 253 83 180 140 104 115 132 150 200 284 163 77 216 114 49 263 170 71 88"
            " 280 70 143 44 292 65 151 118 112 56 224 256 99 250 259 145 142 179 194 278 212 268"
            " 110 72 166 265 249 25 133 73 271 17 1 42 275 147 182 211 18 190 4 53 75 33 135 197"
            " 61 260 54 295 94 258 31 185 277 81 69 16 34 187 229 251 23 162 218 8 46 43 139 64"
            " 175 272 141 57 55 95 210 60 11 226 158 245 248 63 206 13 89 204 106 68 121 269 257"
            " 41 137 209 289 192 155 239 198 19 138 222 92 205 62 169 293 26 219 287 203 117 273"
            " 152 85 122 285 5 153 38 24 286 261 9 86 281 196 45 173 58 171 96 207 124 111 105 215"
            " 47 165 174 242 240 279 157 195 14 120 167 262 270 6 67 221 21 154 244 148 76 202 252"
            " 12 125 100 193 51 101 80 177 254 266 102 291 7 188 208 2 36 91 160 131 168 126 98"
            " 128 228 28 93 149 288 134 136 267 32 189 156 52 82 146 3 178 35 159 255 283 108 20"
            " 276 109 161 186 22 119 37 223 84 48 238 231 236 66 237 97 225 241 243 74 40 264 232"
            " 78 274 181 227 246 59 129 10 294 214 191 87 172 29 282 107 130 176 247 30 233 27 213"
            " 144 217 290 39 116 164 201 230 50 234 15 220 183 103 235 0 113 184 123"
        ),
        "sha256:88dd6d0c4a9da961686d1f7ccc88faaa",
        "sha256:25fa252d7e090282229bcc5ea06c86fa",
        "0 1 2 3 4 5 6 7",
        "0 1 2 3 4 5 6 7 8",
        (
            "40 9 10 30 17 4 47 18 41 38 31 0 43 8 35 2 46 33 45 23 28 29 20 21 22 24 25 26 27 49"
            " 3 39 6 32 19 15 48 5 34 42 14 11 36 1 44 12 16 37 13 7"
        ),
        "3 0 1 2 4 5 6 7 8 9 10 11 12 13 14 15",
        (
            "116 58 76 88 84 46 54 68 14 40 72 94 90 34 26 6 108 112 104 30 122 2 48 10 16 102"
            " 106 118 80 74 4 78 28 98 82 66 92 126 100 56 36 31 15 7 1 38 3 5 9 11 13 17 19 21 23"
            " 25 27 29 33 35 37 39 41 43 45 47 49 51 53 55 57 59 61 63 65 67 69 71 73 75 77 79 81"
            " 83 85 87 89 91 93 95 97 99 101 103 105 107 109 111 113 115 117 119 121 123 125 127"
            " 22 24 42 62 60 96 52 12 114 70 86 8 110 50 120 20 0 44 18 32 124 64"
        ),
        "0 1 3 5 6 8 10 2 4 7 9 11",
        "0 1 2 3 4 5 6 7 8",
        (
            "3 0 1 2 4 5 6 7 43 14 47 36 25 27 16 17 26 10 37 28 33 15 23 24 46 44 22 45 32 39 8"
            " 34 11 19 12 18 42 41 30 35 13 21 31 9 20 38 40 29"
        ),
        (
            "12 1 0 31 32 33 34 23 24 25 26 27 29 35 36 38 39 37 30 28 14 15 16 11 13 17 20 21 18"
            " 19 22 2 3 4 5 6 7 8 9 10"
        ),
        "7 3 0 1 2 4 5 6 8 9 10 12 13 14 15 16 18 19 20 21 22 23 24 25 26 27 28 29 17 11",
        "0 2 4 3 6 1 5 7",
    ],
    "mq_hash": [
        (
            "-222122291 -222122260 -222122074 -222121826 -222090578 -222121330 -222121299"
            " -222121113 -222120865 -222089617 -222120369 -222120338 -222120152 -222119904"
            " -222088656 -1432849264 -1432849233 -1432849047 -1432848799 -1432817551 85039020"
            " 85039051 85039237 85039485 85070733 85039981 85040012 85040198 85040446 85071694"
            " 85040942 85040973 85041159 85041407 85072655 -1125687953 -1125687922 -1125687736"
            " -1125687488 -1125656240 -315334044 -315334013 -315333827 -315333579 -315302331"
            " -315333083 -315333052 -315332866 -315332618 -315301370 -315332122 -315332091"
            " -315331905 -315331657 -315300409 -1526061017 -1526060986 -1526060800 -1526060552"
            " -1526029304 562034113 562034144 562034330 562034578 562065826 562035074 562035105"
            " 562035291 562035539 562066787 562036035 562036066 562036252 562036500 562067748"
            " -648692860 -648692829 -648692643 -648692395 -648661147 -1528408708 -1528408677"
            " -1528408491 -1528408243 -1528376995 -1528407747 -1528407716 -1528407530 -1528407282"
            " -1528376034 -1528406786 -1528406755 -1528406569 -1528406321 -1528375073 1555831615"
            " 1555831646 1555831832 1555832080 1555863328"
        ),
    ],
    "set": [
        "3 2 1 0",
        "3 2 7 4 1 6 0 5",
        "3 2 7 4 9 8 1 6 11 0 5 10",
        "7 6 3 2 5 4 1 0",
        "7 6 15 3 12 2 11 5 14 4 13 8 1 10 0 9",
        "7 6 15 3 12 21 2 11 20 5 14 23 4 13 22 8 17 16 1 10 19 0 9 18",
        "11 10 13 12 7 6 9 8 3 2 5 4 1 0 15 14",
        ("28 10 30 12 24 6 26 8 20 2 22 4 16 18 0 15 31 11 27 13 29 7 23 9 25 3 19 5 21 1 17 14"),
        (
            "28 10 44 30 12 46 24 6 40 26 8 42 20 2 36 22 4 38 16 32 18 0 34 15 31 11 45 27 13 47"
            " 29 7 41 23 9 43 25 3 37 19 5 39 21 33 1 35 17 14"
        ),
        "3 1 2 0",
        "3 1 6 2 7 4 0 5",
        "3 1 6 11 2 7 4 9 0 5 10 8",
        "7 5 6 3 4 1 2 0",
        "7 5 14 6 15 3 12 4 13 1 10 2 11 8 0 9",
        "7 5 14 23 6 15 3 12 21 4 13 22 1 10 19 2 11 20 8 17 0 9 18 16",
        "15 13 14 11 12 9 10 7 8 5 6 3 4 1 2 0",
        ("30 14 11 29 9 27 7 25 5 23 3 21 1 19 17 15 13 31 28 12 26 10 24 8 22 6 20 4 18 2 16 0"),
        (
            "30 14 11 45 29 9 43 27 7 41 25 5 39 23 3 37 21 1 35 19 33 17 15 13 47 31 28 12 46 26"
            " 10 44 24 8 42 22 6 40 20 4 38 18 2 36 16 0 34 32"
        ),
        "0 3 2 1",
        "0 5 4 3 2 7 1 6",
        "0 5 10 4 9 8 3 2 7 1 6 11",
        "0 4 3 2 1 7 6 5",
        "7 6 15 5 14 0 9 8 4 13 3 12 2 11 1 10",
        "7 6 15 5 14 23 0 9 18 8 17 16 4 13 22 3 12 21 2 11 20 1 10 19",
        "15 14 13 8 7 6 5 12 11 10 9 0 4 3 2 1",
        ("15 31 13 25 7 23 5 29 11 27 9 0 16 4 20 2 18 14 30 8 24 6 22 12 28 10 26 17 21 3 19 1"),
        (
            "15 31 13 47 25 7 41 23 5 39 29 11 45 27 9 43 0 34 16 32 4 38 20 2 36 18 14 30 8 42"
            " 24 6 40 22 12 46 28 10 44 26 17 33 21 3 37 19 1 35"
        ),
    ],
    "merge": [
        "0",
        "1 0",
        "1 2 0",
        "2 1 0",
        "2 3 1 5 0 4",
        "2 3 7 6 1 5 0 4 8",
        "3 2 1 0",
        "3 2 7 4 1 6 0 5",
        "3 2 7 4 9 8 1 6 11 0 5 10",
        "7 6 3 2 5 4 1 0",
        "7 6 15 3 12 2 11 5 14 4 13 8 1 10 0 9",
        "7 6 15 3 12 21 2 11 20 5 14 23 4 13 22 8 17 16 1 10 19 0 9 18",
        "11 10 7 6 9 8 3 2 5 4 1 0",
        "11 10 23 7 20 6 19 9 22 8 21 3 16 2 15 5 18 4 17 12 1 14 0 13",
        (
            "10 20 6 32 22 8 34 16 2 28 18 4 30 12 24 14 0 26 11 23 7 33 19 9 35 21 3 29 15 5 31"
            " 17 25 1 27 13"
        ),
        "11 10 13 12 7 6 9 8 3 2 5 4 1 0 15 14",
        ("28 10 30 12 24 6 26 8 20 2 22 4 16 18 0 15 31 11 27 13 29 7 23 9 25 3 19 5 21 1 17 14"),
        (
            "28 10 44 30 12 46 24 6 40 26 8 42 20 2 36 22 4 38 16 32 18 0 34 15 31 11 45 27 13 47"
            " 29 7 41 23 9 43 25 3 37 19 5 39 21 33 1 35 17 14"
        ),
        "10 12 6 8 2 4 0 23 19 21 15 17 11 13 7 9 3 5 1 22 18 20 14 16",
        (
            "36 10 38 12 32 6 34 8 28 2 30 4 24 26 0 23 47 19 43 21 45 15 39 17 41 11 35 13 37 7"
            " 31 9 33 3 27 5 29 1 25 22 44 18 46 20 40 14 42 16"
        ),
        (
            "60 38 12 56 34 8 52 30 4 48 26 0 47 69 43 21 65 39 17 61 35 13 57 31 9 53 27 5 49 1"
            " 22 44 18 70 40 14 66 36 10 62 32 6 58 28 2 54 24 50 23 19 71 45 15 67 41 11 63 37 7"
            " 59 33 3 55 29 51 25 68 46 20 64 42 16"
        ),
        "0",
        "1 0",
        "1 0 2",
        "1 2 0",
        "1 5 2 3 0 4",
        "1 5 2 3 7 0 4 8 6",
        "3 1 2 0",
        "3 1 6 2 7 4 0 5",
        "3 1 6 11 2 7 4 9 0 5 10 8",
        "7 5 6 3 4 1 2 0",
        "7 5 14 6 15 3 12 4 13 1 10 2 11 8 0 9",
        "7 5 14 23 6 15 3 12 21 4 13 22 1 10 19 2 11 20 8 17 0 9 18 16",
        "11 9 10 7 8 5 6 3 4 1 2 0",
        "11 9 22 10 23 7 20 8 21 5 18 6 19 3 16 4 17 1 14 2 15 12 0 13",
        (
            "11 9 35 23 7 33 21 5 31 19 3 29 17 1 27 15 25 13 22 10 20 8 34 18 6 32 16 4 30 14 2"
            " 28 12 0 26 24"
        ),
        "15 13 14 11 12 9 10 7 8 5 6 3 4 1 2 0",
        ("30 14 11 29 9 27 7 25 5 23 3 21 1 19 17 15 13 31 28 12 26 10 24 8 22 6 20 4 18 2 16 0"),
        (
            "30 14 11 45 29 9 43 27 7 41 25 5 39 23 3 37 21 1 35 19 33 17 15 13 47 31 28 12 46 26"
            " 10 44 24 8 42 22 6 40 20 4 38 18 2 36 16 0 34 32"
        ),
        "22 20 18 16 14 11 9 7 5 3 1 23 21 19 17 15 13 12 10 8 6 4 2 0",
        (
            "46 22 44 20 42 18 40 16 38 14 11 37 9 35 7 33 5 31 3 29 1 27 25 23 21 47 19 45 17 43"
            " 15 41 13 39 36 12 34 10 32 8 30 6 28 4 26 2 24 0"
        ),
        (
            "46 20 42 68 16 38 64 11 37 59 7 33 55 3 29 51 25 21 47 69 17 43 65 13 39 12 34 60 8"
            " 30 56 4 26 52 0 48 22 44 70 18 40 66 14 61 9 35 57 5 31 53 1 27 49 23 71 19 45 67 15"
            " 41 63 36 62 10 32 58 6 28 54 2 24 50"
        ),
    ],
    "putall": [
        (
            "2 4 8 8 8 16 16 16 16 16 16 32 32 32 32 32 32 32 32 32 32 32 32 64 64 64 64 64 64 64"
            " 64 64 64 64 64 64 64 64 64 64 64 64 64 64 64 64 64 128 128 128 128 128 128 128 128"
            " 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128"
            " 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 128 256 256"
            " 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256"
            " 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256"
            " 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256"
            " 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256 256"
            " 256 256 256 256 256 256 256 256 256 256 512 512 512 512 512 512 512 512 512"
        ),
    ],
}


def _check(got: list[str], keys: list[str], expected: str) -> None:
    assert sorted(got) == sorted(keys)
    assert _encode(got, keys) == expected


@pytest.mark.parametrize(
    ("name", "expected"), list(zip(KEY_CASES, JAVA_OUTPUT["properties"], strict=True))
)
def test_properties_order(name: str, expected: str) -> None:
    keys = KEY_CASES[name]
    _check(java_properties_order(keys), list(dict.fromkeys(keys)), expected)


@pytest.mark.parametrize(
    ("name", "expected"), list(zip(KEY_CASES, JAVA_OUTPUT["hashmap"], strict=True))
)
def test_hashmap_order(name: str, expected: str) -> None:
    if name in HASHMAP_UNSIMULATED:
        pytest.skip("a treeified HashMap bin (9+ keys, table of 64+) is not simulated")
    keys = list(dict.fromkeys(KEY_CASES[name]))
    _check(java_hashmap_order(KEY_CASES[name]), keys, expected)
    _check(java_hashmap_order_by(keys, java_hash), keys, expected)


def test_message_queue_hash() -> None:
    got = [
        message_queue_hash(t, b, q) for t in HASH_TOPICS for b in HASH_BROKERS for q in QUEUE_IDS
    ]
    assert got == [int(h) for h in JAVA_OUTPUT["mq_hash"][0].split()]


def _mq_hash(topic: str) -> Callable[[str], int]:
    """The ``MessageQueue.hashCode`` of a queue ``broker:queueId`` of ``topic``."""

    def hash_of(queue: str) -> int:
        broker, queue_id = queue.split(":")
        return message_queue_hash(topic, broker, int(queue_id))

    return hash_of


@pytest.mark.parametrize(
    ("case", "expected"), list(zip(SET_CASES, JAVA_OUTPUT["set"], strict=True))
)
def test_hashset_of_message_queues(case: tuple[str, int, int], expected: str) -> None:
    topic, n, brokers = case
    queues = _queues(n, brokers)
    _check(java_hashmap_order_by(queues, _mq_hash(topic)), queues, expected)


@pytest.mark.parametrize(
    ("case", "expected"), list(zip(MERGE_CASES, JAVA_OUTPUT["merge"], strict=True))
)
def test_hashmap_putall_per_broker(case: tuple[str, int, int], expected: str) -> None:
    """``new HashMap<>()``, then ``putAll`` of each broker's own ``HashMap`` of its queues:
    the first sizes the table for its entries (``java_putall_capacity``), later ones land in
    a table that grows as a ``put`` grows it."""
    topic, n, brokers = case
    hash_of = _mq_hash(topic)
    merged: list[str] = []
    capacity = 0
    for broker in BROKERS[:brokers]:
        own = java_hashmap_order_by([f"{broker}:{q}" for q in range(n)], hash_of)
        capacity = capacity or java_putall_capacity(len(own))
        merged = java_hashmap_order_by([*merged, *own], hash_of, capacity)
        while len(merged) > capacity * 3 // 4:
            capacity *= 2
    _check(merged, _queues(n, brokers), expected)


def test_putall_capacity() -> None:
    got = [java_putall_capacity(s) for s in PUTALL_SIZES]
    assert got == [int(c) for c in JAVA_OUTPUT["putall"][0].split()]
    assert java_putall_capacity(0) == 16


def test_hashmap_order_by_capacity_is_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        java_hashmap_order_by(["a"], java_hash, 12)


if __name__ == "__main__":  # regeneration, see the module's docstring
    if sys.argv[1:] == ["program"]:
        sys.stdout.write(JAVA_PROGRAM)
    elif sys.argv[1:] == ["input"]:
        sys.stdout.write("".join(f"{line}\n" for line in java_input()))
    elif sys.argv[1:] == ["expect"]:
        print(_literal(_expectations(sys.stdin.readlines())))
    else:
        sys.exit("usage: python -m tests.codec.test_java_orders program|input|expect")
