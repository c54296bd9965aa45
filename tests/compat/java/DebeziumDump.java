// The Debezium MySQL connector (embedded engine) reading the dumper as its MySQL server: schema
// from the server (snapshot.mode=no_data), then the binlog from the current position. Prints
// "READY" once its task started (its binlog client logs "Connected to …" on stderr once the dump
// runs), then one line per change event value (JSON); exits after N events, or 1 on a timeout. Usage: java -cp "jars/*" DebeziumDump.java HOST PORT USER PASSWORD N TIMEOUT_S [SNAPSHOT_MODE [TABLES]]
// (SNAPSHOT_MODE other than no_data: its default locking mode; TABLES: table.include.list)
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

public class DebeziumDump {
    public static void main(String[] args) throws Exception {
        int wanted = Integer.parseInt(args[4]);
        long timeoutS = Long.parseLong(args[5]);
        Properties p = new Properties();
        p.setProperty("name", "compat");
        p.setProperty("connector.class", "io.debezium.connector.mysql.MySqlConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.MemoryOffsetBackingStore");
        p.setProperty("offset.flush.interval.ms", "1000");
        p.setProperty("schema.history.internal", "io.debezium.relational.history.MemorySchemaHistory");
        p.setProperty("database.hostname", args[0]);
        p.setProperty("database.port", args[1]);
        p.setProperty("database.user", args[2]);
        p.setProperty("database.password", args[3]);
        p.setProperty("database.server.id", "65123");
        p.setProperty("topic.prefix", "compat");
        String mode = args.length > 6 ? args[6] : "no_data";
        p.setProperty("snapshot.mode", mode);
        if (mode.equals("no_data")) p.setProperty("snapshot.locking.mode", "none");
        if (args.length > 7) p.setProperty("table.include.list", args[7]);
        p.setProperty("database.ssl.mode", "disabled");
        p.setProperty("include.schema.changes", "false");
        p.setProperty("decimal.handling.mode", "string");
        p.setProperty("key.converter.schemas.enable", "false");
        p.setProperty("value.converter.schemas.enable", "false");
        CountDownLatch done = new CountDownLatch(wanted);
        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
            .using(p)
            .using(new DebeziumEngine.ConnectorCallback() {
                @Override
                public void taskStarted() {
                    System.out.println("READY");
                    System.out.flush();
                }
            })
            .using((success, message, error) -> {
                if (!success) {
                    System.err.println("engine stopped: " + message + (error == null ? "" : " " + error));
                    while (done.getCount() > 0) done.countDown();
                }
            })
            .notifying(record -> {
                if (record.value() == null || done.getCount() == 0) return;
                System.out.println(record.value());
                System.out.flush();
                done.countDown();
            })
            .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        boolean all = done.await(timeoutS, TimeUnit.SECONDS);
        engine.close();
        executor.shutdown();
        System.exit(all ? 0 : 1);
    }
}
