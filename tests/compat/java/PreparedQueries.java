// Connector/J (JDBC) with server-side prepared statements (useServerPrepStmts=true): the schema
// queries a consumer sends, prepared and executed with parameters through COM_STMT_PREPARE /
// COM_STMT_EXECUTE, each result printed as one JSON line {"query", "columns", "rows"}.
// Usage: java -cp 'jars/*' PreparedQueries.java HOST PORT USER PASSWORD
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.util.ArrayList;
import java.util.List;

public class PreparedQueries {
    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof Number) return v.toString();
        StringBuilder out = new StringBuilder("\"");
        for (char c : v.toString().toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }

    static void run(Connection conn, String query, Object... params) throws Exception {
        try (PreparedStatement ps = conn.prepareStatement(query)) {
            for (int i = 0; i < params.length; i++) ps.setObject(i + 1, params[i]);
            try (ResultSet rs = ps.executeQuery()) {
                ResultSetMetaData meta = rs.getMetaData();
                List<String> columns = new ArrayList<>();
                for (int i = 1; i <= meta.getColumnCount(); i++) columns.add(json(meta.getColumnLabel(i)));
                List<String> rows = new ArrayList<>();
                while (rs.next()) {
                    List<String> values = new ArrayList<>();
                    for (int i = 1; i <= meta.getColumnCount(); i++) values.add(json(rs.getObject(i)));
                    rows.add("[" + String.join(",", values) + "]");
                }
                System.out.println("{\"query\":" + json(query) + ",\"columns\":[" + String.join(",", columns)
                    + "],\"rows\":[" + String.join(",", rows) + "]}");
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:mysql://" + args[0] + ":" + args[1] + "/?useServerPrepStmts=true"
            + "&emulateUnsupportedPstmts=false&cachePrepStmts=false&sslMode=DISABLED&allowPublicKeyRetrieval=true";
        try (Connection conn = DriverManager.getConnection(url, args[2], args[3])) {
            run(conn, "SELECT COLUMN_NAME, ORDINAL_POSITION FROM information_schema.COLUMNS "
                + "WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", "bank", "accounts");
            run(conn, "SHOW INDEX FROM bank.accounts");
            run(conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", "shop");
            run(conn, "SHOW MASTER STATUS");
        }
    }
}
