// Reads the global binlog with mysql-binlog-connector-java's BinaryLogClient (the library under
// Debezium's MySQL connector) from binlog.000001:4 and prints one JSON line per rows event:
// {"schema", "table", "kind": "write"|"update"|"delete", "rows": [[v, ...], ...]} (an update's
// rows are its after images). Numbers and DECIMALs as JSON strings, byte[] as {"hex": ...}.
// Exits 0 after N rows events, 1 on an error or when the timeout passes first.
// Usage: java -cp mysql-binlog-connector-java.jar BinlogDump.java HOST PORT USER PASSWORD N TIMEOUT_S
import com.github.shyiko.mysql.binlog.BinaryLogClient;
import com.github.shyiko.mysql.binlog.event.DeleteRowsEventData;
import com.github.shyiko.mysql.binlog.event.Event;
import com.github.shyiko.mysql.binlog.event.EventData;
import com.github.shyiko.mysql.binlog.event.TableMapEventData;
import com.github.shyiko.mysql.binlog.event.UpdateRowsEventData;
import com.github.shyiko.mysql.binlog.event.WriteRowsEventData;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public class BinlogDump {
    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof byte[] b) {
            StringBuilder hex = new StringBuilder();
            for (byte x : b) hex.append(String.format("%02x", x));
            return "{\"hex\":\"" + hex + "\"}";
        }
        String s = v.toString();
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }

    static String rows(List<Serializable[]> rows) {
        List<String> out = new ArrayList<>();
        for (Serializable[] row : rows) {
            List<String> values = new ArrayList<>();
            for (Serializable v : row) values.add(json(v));
            out.add("[" + String.join(",", values) + "]");
        }
        return "[" + String.join(",", out) + "]";
    }

    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        int wanted = Integer.parseInt(args[4]);
        long timeoutS = Long.parseLong(args[5]);
        BinaryLogClient client = new BinaryLogClient(host, port, args[2], args[3]);
        if (args.length > 6) {
            client.setGtidSet(args[6]);  // GTID mode: COM_BINLOG_DUMP_GTID from this set
        } else {
            client.setBinlogFilename("binlog.000001");
            client.setBinlogPosition(4);
        }
        client.setServerId(65000 + (int) (ProcessHandle.current().pid() % 1000));
        Map<Long, TableMapEventData> tables = new HashMap<>();
        CountDownLatch done = new CountDownLatch(wanted);
        StringBuilder errors = new StringBuilder();
        client.registerEventListener((Event event) -> {
            EventData data = event.getData();
            String kind;
            long tableId;
            List<Serializable[]> rows;
            if (data instanceof TableMapEventData t) {
                tables.put(t.getTableId(), t);
                return;
            } else if (data instanceof WriteRowsEventData w) {
                kind = "write"; tableId = w.getTableId(); rows = w.getRows();
            } else if (data instanceof DeleteRowsEventData d) {
                kind = "delete"; tableId = d.getTableId(); rows = d.getRows();
            } else if (data instanceof UpdateRowsEventData u) {
                kind = "update"; tableId = u.getTableId(); rows = new ArrayList<>();
                for (Map.Entry<Serializable[], Serializable[]> pair : u.getRows()) rows.add(pair.getValue());
            } else {
                return;
            }
            if (done.getCount() == 0) return;
            TableMapEventData t = tables.get(tableId);
            System.out.println("{\"schema\":" + json(t.getDatabase()) + ",\"table\":" + json(t.getTable())
                + ",\"kind\":\"" + kind + "\",\"rows\":" + rows(rows) + "}");
            done.countDown();
        });
        client.registerLifecycleListener(new BinaryLogClient.AbstractLifecycleListener() {
            @Override
            public void onCommunicationFailure(BinaryLogClient c, Exception ex) {
                errors.append("communication failure: ").append(ex);
            }

            @Override
            public void onEventDeserializationFailure(BinaryLogClient c, Exception ex) {
                errors.append("deserialization failure: ").append(ex);
            }
        });
        client.connect(10_000);
        boolean all = done.await(timeoutS, TimeUnit.SECONDS);
        System.out.flush();
        client.disconnect();
        if (!all || errors.length() > 0) {
            System.err.println("after " + (wanted - done.getCount()) + " of " + wanted
                + " rows events: " + (all ? "" : "timeout ") + errors);
            System.exit(1);
        }
        System.exit(0);
    }
}
