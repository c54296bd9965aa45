// Connector/J (JDBC) reading a whole logical table the three ways it reads large results without
// holding them: streaming (fetchSize = Integer.MIN_VALUE) of a plain statement (text protocol)
// and of a server-side prepared one (binary protocol), and a cursor (useCursorFetch=true,
// setFetchSize(n): COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY, then COM_STMT_FETCH n rows at a
// time). Each mode prints one JSON line: {"mode", "held" (the driver's row holder), "rows", "ids" (their sum), "digest" (of every
// value's getString, so the binary rows must read as the text rows do)}.
// Usage: java -cp 'jars/*' FetchModes.java HOST PORT USER PASSWORD TABLE FETCH_SIZE
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HexFormat;

public class FetchModes {
    static long started;

    static void read(String mode, ResultSet rs) throws Exception {
        // How the driver holds the rows: ResultsetRowsStreaming or ResultsetRowsCursor (a
        // ResultsetRowsStatic would be the whole result read into memory).
        String held = rs.unwrap(com.mysql.cj.protocol.Resultset.class).getRows().getClass().getSimpleName();
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        int columns = rs.getMetaData().getColumnCount();
        long rows = 0, ids = 0;
        while (rs.next()) {
            rows++;
            ids += rs.getLong(1);
            for (int i = 1; i <= columns; i++) {
                String value = rs.getString(i);
                digest.update((value == null ? "\\N" : value).getBytes("UTF-8"));
                digest.update((byte) 0);
            }
        }
        System.out.println("{\"mode\":\"" + mode + "\",\"held\":\"" + held + "\",\"rows\":" + rows + ",\"ids\":" + ids
            + ",\"digest\":\"" + HexFormat.of().formatHex(digest.digest()) + "\",\"s\":"
            + (System.nanoTime() - started) / 1e9 + "}");
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String base = "jdbc:mysql://" + args[0] + ":" + args[1]
            + "/?sslMode=DISABLED&allowPublicKeyRetrieval=true&cachePrepStmts=false";
        String table = args[4];
        int fetchSize = Integer.parseInt(args[5]);
        String query = "SELECT * FROM " + table + " WHERE id >= ?";
        try (Connection conn = DriverManager.getConnection(base, args[2], args[3]);
             Statement st = conn.createStatement(ResultSet.TYPE_FORWARD_ONLY, ResultSet.CONCUR_READ_ONLY)) {
            st.setFetchSize(Integer.MIN_VALUE);
            started = System.nanoTime();
            try (ResultSet rs = st.executeQuery("SELECT * FROM " + table)) {
                read("stream-text", rs);
            }
        }
        try (Connection conn = DriverManager.getConnection(base + "&useServerPrepStmts=true", args[2], args[3]);
             PreparedStatement ps = conn.prepareStatement(query, ResultSet.TYPE_FORWARD_ONLY, ResultSet.CONCUR_READ_ONLY)) {
            ps.setFetchSize(Integer.MIN_VALUE);
            ps.setLong(1, 0);
            started = System.nanoTime();
            try (ResultSet rs = ps.executeQuery()) {
                read("stream-binary", rs);
            }
        }
        try (Connection conn = DriverManager.getConnection(base + "&useCursorFetch=true", args[2], args[3]);
             PreparedStatement ps = conn.prepareStatement(query, ResultSet.TYPE_FORWARD_ONLY, ResultSet.CONCUR_READ_ONLY)) {
            ps.setFetchSize(fetchSize);
            ps.setLong(1, 0);
            started = System.nanoTime();
            try (ResultSet rs = ps.executeQuery()) {
                read("cursor", rs);
            }
        }
    }
}
