package perflake.gate;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Base64;
import java.util.Properties;

/** A minimal JDBC client for the SQL server: statements arrive on stdin, one per line,
 * base64 (UTF-8), so that each is sent to the server exactly as written, separators and
 * comments included; one JSON line per statement comes back on stdout:
 *   {"ok":true,"columns":[...],"rows":[[...],...]}  or  {"ok":false,"error":"..."}
 * Usage: SqlClient JDBC_URL USER [PASSWORD_FILE] [MAX_ROWS]. The password is read from
 * a file, never taken on the command line. A statement after a lost connection
 * reconnects, so a server that died shows as an error on every later statement. */
public final class SqlClient {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        Properties props = new Properties();
        props.setProperty("user", args[1]);
        if (args.length > 2 && !args[2].isEmpty()) {
            props.setProperty("password", new String(Files.readAllBytes(Paths.get(args[2])), StandardCharsets.UTF_8)
                              .trim());
        }
        int maxRows = args.length > 3 ? Integer.parseInt(args[3]) : 1000;
        Class.forName("org.apache.hive.jdbc.HiveDriver");
        Connection conn = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String sql = new String(Base64.getDecoder().decode(line), StandardCharsets.UTF_8);
            StringBuilder out = new StringBuilder();
            try {
                if (conn == null || conn.isClosed()) {
                    conn = DriverManager.getConnection(url, props);
                }
                try (Statement st = conn.createStatement()) {
                    boolean hasRows = st.execute(sql);
                    out.append("{\"ok\":true,\"columns\":[");
                    if (hasRows) {
                        ResultSet rs = st.getResultSet();
                        ResultSetMetaData md = rs.getMetaData();
                        int n = md.getColumnCount();
                        for (int i = 1; i <= n; i++) {
                            out.append(i > 1 ? "," : "").append(json(md.getColumnLabel(i)));
                        }
                        out.append("],\"rows\":[");
                        int count = 0;
                        while (rs.next() && count < maxRows) {
                            out.append(count++ > 0 ? ",[" : "[");
                            for (int i = 1; i <= n; i++) {
                                out.append(i > 1 ? "," : "").append(json(rs.getString(i)));
                            }
                            out.append("]");
                        }
                        out.append("]}");
                    } else {
                        out.append("],\"rows\":[]}");
                    }
                }
            } catch (SQLException | RuntimeException e) {
                out.setLength(0);
                out.append("{\"ok\":false,\"error\":").append(json(String.valueOf(e.getMessage()))).append("}");
                if (conn != null && !(e instanceof SQLException && isServerAnswer((SQLException) e))) {
                    try {
                        conn.close();
                    } catch (SQLException ignored) {
                        // the connection is gone already
                    }
                    conn = null;
                }
            }
            System.out.println(out);
            System.out.flush();
        }
        if (conn != null) {
            conn.close();
        }
    }

    /** The server answered with an error (the connection is fine), as opposed to a lost connection. */
    private static boolean isServerAnswer(SQLException e) {
        String state = e.getSQLState();
        return state == null || !state.startsWith("08");
    }

    static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
