package perflake.gate;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;

/** The audit log: one line per event, appended to the file named by the system property
 * perflake.audit.log (stderr when unset). Values are quoted on one line, so a statement
 * cannot forge a line; no password ever reaches it. */
final class Audit {
    private static OutputStream out;

    private Audit() {}

    static synchronized void write(String event, String... fields) {
        StringBuilder line = new StringBuilder(Instant.now().toString()).append(" ").append(event);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            line.append(" ").append(fields[i]).append("=").append(quote(fields[i + 1]));
        }
        line.append("\n");
        try {
            stream().write(line.toString().getBytes(StandardCharsets.UTF_8));
            stream().flush();
        } catch (IOException e) {
            System.err.println("perflake audit: cannot write the audit log: " + e.getMessage());
        }
    }

    private static OutputStream stream() throws IOException {
        if (out == null) {
            String path = System.getProperty("perflake.audit.log");
            out = path == null || path.isEmpty() ? System.err : new FileOutputStream(path, true);
        }
        return out;
    }

    static String quote(String value) {
        if (value == null) {
            return "\"\"";
        }
        String v = value.length() > 2000 ? value.substring(0, 2000) + "..." : value;
        StringBuilder s = new StringBuilder("\"");
        for (char c : v.toCharArray()) {
            if (c == '"' || c == '\\') {
                s.append('\\').append(c);
            } else if (c == '\n') {
                s.append("\\n");
            } else if (c == '\r') {
                s.append("\\r");
            } else if (c < 0x20) {
                s.append(String.format("\\u%04x", (int) c));
            } else {
                s.append(c);
            }
        }
        return s.append('"').toString();
    }
}
