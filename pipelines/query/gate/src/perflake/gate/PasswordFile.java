package perflake.gate;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.spec.InvalidKeySpecException;
import java.util.Base64;
import java.util.List;

import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.security.sasl.AuthenticationException;

import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/** HiveServer2 CUSTOM authentication against a password file of salted hashes, named by
 * the system property perflake.auth.passwd.file (set with --hiveconf). One user a line:
 *   name:pbkdf2_sha256:iterations:salt(base64):hash(base64)
 * written by `perflake sql-server add-user`. The file is read at every login, so users
 * are added or removed without a restart. Every attempt is audited, never the password. */
public final class PasswordFile implements PasswdAuthenticationProvider {
    public static final String PROPERTY = "perflake.auth.passwd.file";

    @Override
    public void Authenticate(String user, String password) throws AuthenticationException {
        String file = System.getProperty(PROPERTY);
        if (file == null || file.isEmpty()) {
            throw new AuthenticationException("the server has no password file (" + PROPERTY + ")");
        }
        if (user != null && password != null && matches(Paths.get(file), user, password)) {
            Audit.write("login", "user", user);
            return;
        }
        Audit.write("login-refused", "user", user);
        throw new AuthenticationException("user name or password not accepted");
    }

    static boolean matches(Path file, String user, String password) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            System.err.println("perflake auth: cannot read the password file " + file + ": " + e.getMessage());
            return false;
        }
        for (String line : lines) {
            String[] f = line.trim().split(":");
            if (f.length != 5 || !f[0].equals(user) || !f[1].equals("pbkdf2_sha256")) {
                continue;
            }
            try {
                int iterations = Integer.parseInt(f[2]);
                byte[] salt = Base64.getDecoder().decode(f[3]);
                byte[] expected = Base64.getDecoder().decode(f[4]);
                PBEKeySpec spec = new PBEKeySpec(password.toCharArray(), salt, iterations, expected.length * 8);
                byte[] actual = SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded();
                spec.clearPassword();
                return MessageDigest.isEqual(expected, actual);
            } catch (IllegalArgumentException | NoSuchAlgorithmException | InvalidKeySpecException e) {
                return false;
            }
        }
        return false;
    }
}
