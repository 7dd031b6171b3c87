package perflake.gate;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;

import org.apache.spark.connect.proto.ExecutePlanRequest;
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
 *
 * What passes still meets the gate: the planner's plans are analyzed behind its rules. */
public final class ConnectGuard implements ServerInterceptor {
    private static final Set<String> ARTIFACT_RPCS = new HashSet<>(Arrays.asList("AddArtifacts", "ArtifactStatus"));
    private static final int AUDITED_PLAN_CHARS = 2000;

    public ConnectGuard() {}

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
        if (rpc.equals("ExecutePlan")) {
            Outcome<Q, R> outcome = new Outcome<>(call);
            return new Judged<>(next.startCall(outcome, headers), call, rpc, outcome);
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
        org.sparkproject.connect.google_protos.rpc.Status status = org.sparkproject.connect.google_protos.rpc.Status
            .newBuilder().setCode(Status.Code.PERMISSION_DENIED.value()).setMessage(sentence).build();
        StatusRuntimeException e = StatusProto.toStatusRuntimeException(status);
        call.close(e.getStatus(), e.getTrailers() == null ? new Metadata() : e.getTrailers());
    }

    /** Judges each request message before the handler sees it; after a refusal, the handler
     * sees nothing more of the call (it never starts the operation). */
    private static final class Judged<Q, R> extends ForwardingServerCallListener.SimpleForwardingServerCallListener<Q> {
        private final ServerCall<Q, R> call;
        private final String rpc;
        private final Outcome<Q, R> outcome;
        private boolean refused;

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
                String[] who = ConnectRules.userAndSession(request);
                String refusal;
                try {
                    refusal = ConnectRules.judge(request);
                } catch (RuntimeException e) {  // a request the rules cannot read is not let through
                    refusal = Refusal.PREFIX + "a request the Connect guard cannot read (" + e.getClass().getSimpleName()
                              + ") cannot be judged, and " + Gate.SCOPE + ".";
                }
                if (outcome != null && request instanceof ExecutePlanRequest) {
                    ExecutePlanRequest execute = (ExecutePlanRequest) request;
                    outcome.user = who[0];
                    outcome.id = execute.getOperationId();
                    Audit.write("connect-query", "user", who[0], "session", who[1], "id", outcome.id, "plan",
                                describe(execute));
                }
                if (refusal != null) {
                    refused = true;
                    Audit.write(outcome != null ? "refused" : "connect-refused", "rpc", rpc, "user", who[0],
                                "session", who[1], "id", outcome != null ? outcome.id : "", "reason", refusal);
                    deny(call, refusal);
                    return;
                }
            }
            super.onMessage(message);
        }

        @Override
        public void onHalfClose() {
            if (!refused) {
                super.onHalfClose();
            }
        }
    }

    /** An ExecutePlan call whose end (finished, refused by the gate, failed, cancelled) goes
     * to the audit log; `finished` means the call ended without error (a result longer
     * than one stream continues over ReattachExecute). */
    private static final class Outcome<Q, R> extends ForwardingServerCall.SimpleForwardingServerCall<Q, R> {
        volatile String user = "";
        volatile String id = "";

        Outcome(ServerCall<Q, R> call) {
            super(call);
        }

        @Override
        public void close(Status status, Metadata trailers) {
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
