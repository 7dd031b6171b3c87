package perflake.gate;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.UUID;

import org.apache.spark.connect.proto.ExecutePlanRequest;
import org.apache.spark.connect.proto.ReattachExecuteRequest;
import org.sparkproject.connect.grpc.ForwardingServerCall;
import org.sparkproject.connect.grpc.ForwardingServerCallListener;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.ServerCall;
import org.sparkproject.connect.grpc.ServerCallHandler;
import org.sparkproject.connect.grpc.ServerInterceptor;
import org.sparkproject.connect.grpc.Status;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.protobuf.StatusProto;
import org.sparkproject.connect.protobuf.Message;

/** Spark Connect's guard: a gRPC interceptor of the SQL service's Connect endpoint
 * (spark.connect.grpc.interceptor.classes), behind Spark's token check and in front of
 * the handlers, so it sees each request as parsed protobuf before Spark's planner does.
 *
 * - Artifact calls (AddArtifacts, ArtifactStatus) are refused before any of their bytes
 *   are read: nothing reaches the service's disk or class path.
 * - Every other request is judged by ConnectRules (code, caches, reads by path, ...); a
 *   refused call ends with PERMISSION_DENIED and the gate's one-sentence form, in the
 *   status and as a google.rpc.Status, which clients show as the message.
 * - Every ExecutePlan is written to the audit log (the JDBC server's): the client's
 *   self-declared user, its session, the operation, the plan, and how it ended.
 * - An operation that outlives the statement timeout is stopped (ConnectTimeout); its
 *   call (ExecutePlan, or the ReattachExecute that continues it) ends with
 *   DEADLINE_EXCEEDED and ConnectTimeout's one sentence instead of Spark's own message.
 *   So does an AnalyzePlan call (Analyses), which is no operation but plans as long as
 *   its statement makes it.
 *
 * What passes still meets the gate: the planner's plans are analyzed behind its rules. */
public final class ConnectGuard implements ServerInterceptor {
    private static final Set<String> ARTIFACT_RPCS = new HashSet<>(Arrays.asList("AddArtifacts", "ArtifactStatus"));
    private static final int AUDITED_PLAN_CHARS = 2000;

    public ConnectGuard() {
        ConnectTimeout.start();
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        String rpc = call.getMethodDescriptor().getBareMethodName();
        if (ARTIFACT_RPCS.contains(rpc)) {
            String what = rpc.equals("AddArtifacts")
                ? "uploading artifacts (spark.addArtifacts, copyFromLocalToFs: files, jars, classes)"
                : "asking for artifacts (ArtifactStatus), the first step of uploading them,";
            String sentence = Refusal.PREFIX + what + " would put files and classes on the service's disk and class "
                              + "path, and " + Gate.SCOPE + ".";
            Audit.write("connect-refused", "rpc", rpc, "reason", sentence);
            deny(call, sentence);
            return new ServerCall.Listener<Q>() {};
        }
        if (rpc.equals("ExecutePlan") || rpc.equals("ReattachExecute")) {
            Outcome<Q, R> outcome = new Outcome<>(call, rpc.equals("ExecutePlan"));
            return new Judged<>(next.startCall(outcome, headers), call, rpc, outcome);
        }
        if (rpc.equals("AnalyzePlan")) {
            Analysis<Q, R> analysis = new Analysis<>(call);
            Judged<Q, R> judged = new Judged<>(next.startCall(analysis, headers), call, rpc, null);
            judged.analysis = analysis;
            return judged;
        }
        return new Judged<>(next.startCall(call, headers), call, rpc, null);
    }

    /** The request's plan for the audit log, decompressed where it can be. */
    private static String describe(ExecutePlanRequest request) {
        org.apache.spark.connect.proto.Plan plan = request.getPlan();
        try {
            plan = ConnectRules.decompressed(plan);
        } catch (RuntimeException e) {
            // logged as sent; the rules refuse a plan that cannot be decompressed
        }
        return ConnectRules.describe(plan, AUDITED_PLAN_CHARS);
    }

    /** End the call with PERMISSION_DENIED and `sentence`, also as a google.rpc.Status in
     * the trailers: pyspark then shows the sentence itself, not gRPC's debug text. */
    static void deny(ServerCall<?, ?> call, String sentence) {
        StatusRuntimeException e = answer(Status.Code.PERMISSION_DENIED, sentence);
        call.close(e.getStatus(), e.getTrailers() == null ? new Metadata() : e.getTrailers());
    }

    /** A status with `code` and `sentence`, also as a google.rpc.Status (what pyspark shows). */
    private static StatusRuntimeException answer(Status.Code code, String sentence) {
        return StatusProto.toStatusRuntimeException(org.sparkproject.connect.google_protos.rpc.Status.newBuilder()
            .setCode(code.value()).setMessage(sentence).build());
    }

    /** Judges each request message before the handler sees it; after a refusal, the handler
     * sees nothing more of the call (it never starts the operation). */
    private static final class Judged<Q, R> extends ForwardingServerCallListener.SimpleForwardingServerCallListener<Q> {
        private final ServerCall<Q, R> call;
        private final String rpc;
        private final Outcome<Q, R> outcome;
        private boolean refused;
        Analysis<Q, R> analysis;  // an AnalyzePlan call: its handler runs under the timeout
        private String[] who = {"", ""};

        Judged(ServerCall.Listener<Q> delegate, ServerCall<Q, R> call, String rpc, Outcome<Q, R> outcome) {
            super(delegate);
            this.call = call;
            this.rpc = rpc;
            this.outcome = outcome;
        }

        @Override
        public void onMessage(Q message) {
            if (refused) {
                return;
            }
            if (message instanceof Message) {
                Message request = (Message) message;
                who = ConnectRules.userAndSession(request);
                String refusal;
                try {
                    refusal = ConnectRules.judge(request);
                } catch (RuntimeException e) {  // a request the rules cannot read is not let through
                    refusal = Refusal.PREFIX + "a request the Connect guard cannot read (" + e.getClass().getSimpleName()
                              + ") cannot be judged, and " + Gate.SCOPE + ".";
                }
                if (outcome != null && request instanceof ReattachExecuteRequest) {
                    outcome.id = ((ReattachExecuteRequest) request).getOperationId();
                }
                if (outcome != null && request instanceof ExecutePlanRequest) {
                    ExecutePlanRequest execute = (ExecutePlanRequest) request;
                    if (execute.getOperationId().isEmpty()) {
                        // Spark would name it; naming it here lets the timeout's sentence find its call.
                        execute = execute.toBuilder().setOperationId(UUID.randomUUID().toString()).build();
                        @SuppressWarnings("unchecked")
                        Q named = (Q) execute;
                        message = named;
                    }
                    outcome.user = who[0];
                    outcome.id = execute.getOperationId();
                    Audit.write("connect-query", "user", who[0], "session", who[1], "id", outcome.id, "plan",
                                describe(execute));
                }
                if (refusal != null) {
                    refused = true;
                    boolean statement = outcome != null && outcome.audited;
                    Audit.write(statement ? "refused" : "connect-refused", "rpc", rpc, "user", who[0], "session",
                                who[1], "id", statement ? outcome.id : "", "reason", refusal);
                    deny(call, refusal);
                    return;
                }
            }
            super.onMessage(message);
        }

        @Override
        public void onHalfClose() {
            if (refused) {
                return;
            }
            if (analysis == null) {
                super.onHalfClose();
                return;
            }
            Analyses.Call call = Analyses.enter(who[0], who[1]);  // the unary handler runs here, on this thread
            analysis.call = call;
            try {
                super.onHalfClose();
            } finally {
                Analyses.leave(call);
            }
        }
    }

    /** An AnalyzePlan call: ended with DEADLINE_EXCEEDED and ConnectTimeout's sentence when
     * the timeout interrupted it, whatever Spark's handler made of that. */
    private static final class Analysis<Q, R> extends ForwardingServerCall.SimpleForwardingServerCall<Q, R> {
        volatile Analyses.Call call;

        Analysis(ServerCall<Q, R> delegate) {
            super(delegate);
        }

        @Override
        public void close(Status status, Metadata trailers) {
            Analyses.Call c = call;
            if (!status.isOk() && c != null && c.interrupted) {
                StatusRuntimeException e = answer(Status.Code.DEADLINE_EXCEEDED, StatementTimeout.sentence());
                super.close(e.getStatus(), e.getTrailers() == null ? new Metadata() : e.getTrailers());
                return;
            }
            super.close(status, trailers);
        }
    }

    /** An ExecutePlan call whose end (finished, refused by the gate, failed, cancelled) goes
     * to the audit log (`audited`); `finished` means the call ended without error (a result
     * longer than one stream continues over ReattachExecute, which is not audited). Either
     * call of an operation the timeout stopped ends with the timeout's sentence (the
     * watchdog wrote its `timed-out` line). */
    private static final class Outcome<Q, R> extends ForwardingServerCall.SimpleForwardingServerCall<Q, R> {
        final boolean audited;
        volatile String user = "";
        volatile String id = "";

        Outcome(ServerCall<Q, R> call, boolean audited) {
            super(call);
            this.audited = audited;
        }

        @Override
        public void close(Status status, Metadata trailers) {
            if (!status.isOk() && ConnectTimeout.stopped(id)) {
                StatusRuntimeException e = answer(Status.Code.DEADLINE_EXCEEDED, StatementTimeout.sentence());
                super.close(e.getStatus(), e.getTrailers() == null ? new Metadata() : e.getTrailers());
                return;
            }
            if (!audited) {
                super.close(status, trailers);
                return;
            }
            if (status.isOk()) {
                Audit.write("finished", "user", user, "id", id);
            } else {
                String message = status.getDescription() == null ? "" : status.getDescription();
                String event = message.contains(Refusal.PREFIX) ? "refused"
                               : status.getCode() == Status.Code.CANCELLED ? "cancelled" : "failed";
                int line = message.indexOf('\n');
                Audit.write(event, "user", user, "id", id, "reason", line < 0 ? message : message.substring(0, line));
            }
            super.close(status, trailers);
        }
    }
}
