package perflake.gate;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.antlr.v4.runtime.CharStreams;
import org.antlr.v4.runtime.Token;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.catalyst.parser.SqlBaseLexer;
import org.apache.spark.sql.catalyst.parser.UpperCaseCharStream;

/** How large and how deeply nested a statement may be before Spark's parser sees it.
 *
 * Spark's parser is not bounded: 20,000 nested parentheses (a 40 KB statement) make its
 * prediction take the whole driver heap, and the OutOfMemoryError lands on whichever
 * service thread allocates next, including the one that accepts JDBC connections, so the
 * service stays up but never answers again. A few thousand levels overflow its stack.
 * The text is read here with Spark's own lexer (linear in the text; it settles quoting
 * and comments exactly as the parser will), and refused when it is longer than
 * DEFAULT_MAX_CHARS characters or nests deeper than DEFAULT_MAX_DEPTH levels (Spark
 * settings {@value #MAX_CHARS} and {@value #MAX_DEPTH} change them). Spark itself gives
 * up on a few hundred levels ("too complex to parse"), so the default depth costs no
 * statement it could run. */
final class StatementBounds {
    static final String MAX_CHARS = "spark.perflake.gate.maxStatementChars";
    static final String MAX_DEPTH = "spark.perflake.gate.maxNesting";
    static final int DEFAULT_MAX_CHARS = 1 << 20;
    static final int DEFAULT_MAX_DEPTH = 100;

    /** Tokens that open a level: parentheses, brackets, CASE ... END; and `<` after STRUCT,
     * ARRAY or MAP (`struct<a: array<int>>`), closed by `>` (or the lexer's `>>`, `>>>`). */
    private static final Set<Integer> OPEN = set(SqlBaseLexer.LEFT_PAREN, SqlBaseLexer.LEFT_BRACKET, SqlBaseLexer.CASE);
    private static final Set<Integer> CLOSE = set(SqlBaseLexer.RIGHT_PAREN, SqlBaseLexer.RIGHT_BRACKET, SqlBaseLexer.END);
    private static final Set<Integer> TYPE_OPENERS = set(SqlBaseLexer.STRUCT, SqlBaseLexer.ARRAY, SqlBaseLexer.MAP);
    private static final Map<Integer, Integer> TYPE_CLOSERS = Map.of(
        SqlBaseLexer.GT, 1, SqlBaseLexer.SHIFT_RIGHT, 2, SqlBaseLexer.SHIFT_RIGHT_UNSIGNED, 3);
    /** Prefix operators: each of a run (`NOT NOT NOT x`, `- - - 1`) is one more level. */
    private static final Set<Integer> PREFIX = set(SqlBaseLexer.NOT, SqlBaseLexer.BANG, SqlBaseLexer.MINUS,
                                                   SqlBaseLexer.PLUS, SqlBaseLexer.TILDE);

    private final int maxChars;
    private final int maxDepth;

    StatementBounds(SparkConf conf) {
        this.maxChars = conf.getInt(MAX_CHARS, DEFAULT_MAX_CHARS);
        this.maxDepth = conf.getInt(MAX_DEPTH, DEFAULT_MAX_DEPTH);
    }

    /** Refuses `text` (a statement, an expression, a data type or a schema) when it is over
     * either bound; returns it otherwise. */
    String check(String text) {
        if (text.length() > maxChars) {
            throw Gate.refuse(String.format("a statement of %,d characters", text.length()),
                              String.format("is longer than this service's limit of %,d (%s), which bounds the memory "
                                            + "one statement can take before it runs; split it into smaller statements",
                                            maxChars, MAX_CHARS));
        }
        SqlBaseLexer lexer = new SqlBaseLexer(new UpperCaseCharStream(CharStreams.fromString(text)));
        lexer.removeErrorListeners();  // a malformed token is the parser's to report
        int open = 0;   // levels open: brackets of every kind
        int angle = 0;  // of which type brackets (`struct<`), closed by `>`, `>>` or `>>>`
        int run = 0;    // prefix operators in a row
        int previous = Token.INVALID_TYPE;
        for (Token t = lexer.nextToken(); t.getType() != Token.EOF; t = lexer.nextToken()) {
            if (t.getChannel() != Token.DEFAULT_CHANNEL) {
                continue;  // whitespace and comments
            }
            int type = t.getType();
            if (OPEN.contains(type)) {
                open++;
            } else if (CLOSE.contains(type)) {
                open = Math.max(0, open - 1);
            } else if (type == SqlBaseLexer.LT && TYPE_OPENERS.contains(previous)) {
                open++;
                angle++;
            } else if (angle > 0 && TYPE_CLOSERS.containsKey(type)) {
                int closed = Math.min(angle, TYPE_CLOSERS.get(type));
                angle -= closed;
                open = Math.max(0, open - closed);
            }
            run = PREFIX.contains(type) ? run + 1 : 0;
            if (open + run > maxDepth) {
                throw tooDeep();
            }
            previous = type;
        }
        return text;
    }

    /** The refusal for a statement nested deeper than the limit (or than Spark's parser's
     * stack: GateParser turns its StackOverflowError into this). */
    RuntimeException tooDeep() {
        return Gate.refuse("a statement nested more than " + maxDepth
                           + " levels deep (brackets of any kind, CASE or prefix operators)",
                           "could exhaust the shared service's memory while it is parsed (" + MAX_DEPTH
                           + "); flatten it, or name its parts in a WITH clause");
    }

    private static Set<Integer> set(Integer... types) {
        return new HashSet<>(Arrays.asList(types));
    }
}
