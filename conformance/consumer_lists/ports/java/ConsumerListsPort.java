// A consumer-lists port in Java, written from spec/port-protocol.md and spec/ports/consumer-lists.md
// alone (issue 17): the call-level behaviour the conformance checker holds a port to.  No dependency
// beyond the JDK; a tiny JSON reader and writer are inside.
//
//   javac -d BUILD ConsumerListsPort.java
//   conq conformance consumer-lists --impl 'stdio:java -cp BUILD ConsumerListsPort' --corpus conformance/consumer_lists/corpus
//
// Newline-delimited JSON on stdin/stdout; logs (none) would go to stderr.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

public final class ConsumerListsPort {

    // ---------------------------------------------------------------- the system under test
    static final int ABSENT = 0, NOT_INTERESTED = 1, INTERESTED = 2, NOTIFIED = 3, NON_ACQUIRING = 4, REMOVED = 5;
    static final String[] NODE_NAMES = {"absent", "not-interested", "interested", "notified", "non-acquiring", "removed"};
    static final int UNARRIVED = 0, AVAILABLE = 1, HELD = 2, ACQ = 3; // ACQ + c: acquired by c
    static final String[] REASONS = {"flow", "tcp"};

    static final class Unsupported extends Exception {
        Unsupported(String m) { super(m); }
    }

    static final class NotEnabled extends Exception {
        NotEnabled(String m) { super(m); }
    }

    static final class UnknownAction extends Exception {
        UnknownAction(String m) { super(m); }
    }

    static final class Queue {
        final int n, m;
        final int[] prio;
        final boolean[] acq;
        final int maxCredit, reasons;
        final boolean held, release, removal, notifyOne, priorityCheck, removeHandsOver, untilEmpty;
        final Integer[] levels; // priorities, highest first

        final int[] node, credit, susp, seen;
        final boolean[] registered, wants, scheduled, pulling;
        final int[] status;
        final boolean[] owed;
        final Map<Integer, List<Integer>> interested = new LinkedHashMap<>();
        int budget;

        Queue(Map<String, Object> cfg) throws Unsupported {
            List<Object> cons = list(cfg.get("consumers"));
            n = cons.size();
            prio = new int[n];
            acq = new boolean[n];
            TreeSet<Integer> ps = new TreeSet<>();
            for (int c = 0; c < n; c++) {
                List<Object> e = list(cons.get(c));
                prio[c] = (int) num(e.get(0));
                acq[c] = (Boolean) e.get(1);
                ps.add(prio[c]);
            }
            levels = ps.descendingSet().toArray(new Integer[0]);
            for (Integer p : levels) interested.put(p, new ArrayList<>());
            m = (int) num(cfg.get("messages"));
            int initialCredit = (int) num(cfg.get("initial_credit"));
            maxCredit = (int) num(cfg.get("max_credit"));
            reasons = (int) num(cfg.get("reasons"));
            held = bool(cfg, "held", false);
            release = bool(cfg, "release", true);
            removal = bool(cfg, "removal", true);
            boolean preadded = bool(cfg, "preadded", true);
            notifyOne = bool(cfg, "notify_one", true);
            priorityCheck = bool(cfg, "priority_check", true);
            removeHandsOver = bool(cfg, "remove_hands_over", true);
            untilEmpty = !"once".equals(cfg.getOrDefault("pull_rule", "until-empty"));
            budget = (int) num(cfg.get("env_budget"));
            // switches this port implements only with their reference values (visible at call level,
            // or actors the call-level view does not drive)
            requireValue(cfg, "flag_before_queue", true);
            requireValue(cfg, "clear_wake_first", true);
            requireValue(cfg, "expiry", false);
            requireValue(cfg, "reject", false);
            Object groups = cfg.get("groups");
            if (groups != null && !list(groups).isEmpty()) throw new Unsupported("message groups are not implemented");
            if (bool(cfg, "priority_blocks_browsers", false) && hasBrowser())
                throw new Unsupported("priority_blocks_browsers is not implemented");

            node = new int[n];
            credit = new int[n];
            susp = new int[n];
            seen = new int[n];
            registered = new boolean[n];
            wants = new boolean[n];
            scheduled = new boolean[n];
            pulling = new boolean[n];
            status = new int[m];
            owed = new boolean[m];
            for (int c = 0; c < n; c++) {
                credit[c] = initialCredit;
                wants[c] = initialCredit > 0;
            }
            if (preadded) {
                for (int c = 0; c < n; c++) add(c, new ArrayList<>());
            }
            settle(new ArrayList<>());
        }

        boolean hasBrowser() {
            for (boolean a : acq) if (!a) return true;
            return false;
        }

        static void requireValue(Map<String, Object> cfg, String key, boolean ref) throws Unsupported {
            Object v = cfg.get(key);
            if (v != null && !v.equals(ref)) throw new Unsupported(key + "=" + v + " is not implemented");
        }

        // -- lists
        void leave(int c) {
            if (node[c] == INTERESTED) interested.get(prio[c]).remove(Integer.valueOf(c));
        }

        void moveTo(int c, int to) {
            leave(c);
            node[c] = to;
            if (to == INTERESTED) interested.get(prio[c]).add(c);
        }

        List<Integer> interestedOrder() {
            List<Integer> out = new ArrayList<>();
            for (Integer p : levels) out.addAll(interested.get(p));
            return out;
        }

        boolean desired(int c) {
            return credit[c] > 0 && susp[c] == 0;
        }

        boolean anyAvailable() {
            for (int j = 0; j < m; j++) if (status[j] == AVAILABLE) return true;
            return false;
        }

        // -- procedures (spec/ports/consumer-lists.md, "Procedures")
        int next(int c) {
            if (!registered[c]) return -1;
            for (int j = 0; j < m; j++) {
                if (status[j] == AVAILABLE && (acq[c] || ((seen[c] >> j) & 1) == 0)) return j;
            }
            return -1;
        }

        boolean noHigher(int c) {
            if (!priorityCheck) return true;
            for (int h = 0; h < n; h++) {
                if (registered[h] && acq[h] && prio[h] > prio[c] && wants[h] && next(h) >= 0) return false;
            }
            return true;
        }

        boolean notify(int c, List<Integer> out) {
            if (acq[c]) {
                if (next(c) < 0 || !noHigher(c) || node[c] != INTERESTED) return false;
                moveTo(c, NOTIFIED);
            }
            scheduled[c] = true;
            out.add(c);
            return true;
        }

        void notifyConsumers(int j, List<Integer> out) {
            for (int c = 0; c < n; c++) {
                if (!acq[c] && node[c] == NON_ACQUIRING && ((seen[c] >> j) & 1) == 0) notify(c, out);
            }
            for (int c : interestedOrder()) {
                if (status[j] != AVAILABLE) break;
                if (notify(c, out)) {
                    if (notifyOne) break;
                } else if (!noHigher(c)) {
                    break;
                }
            }
        }

        void notifyOthers(int c, List<Integer> out) {
            for (int x : interestedOrder()) {
                if (!anyAvailable()) break;
                if (x != c && notify(x, out)) break;
            }
        }

        void queueSetDesired(int c, boolean d, List<Integer> out) {
            if (d) {
                if (node[c] == NOT_INTERESTED) {
                    moveTo(c, acq[c] ? INTERESTED : NON_ACQUIRING);
                    notify(c, out);
                }
            } else {
                boolean moved = acq[c] ? (node[c] == INTERESTED || node[c] == NOTIFIED) : node[c] == NON_ACQUIRING;
                if (moved) {
                    moveTo(c, NOT_INTERESTED);
                    Integer top = null;
                    for (int x = 0; x < n; x++) {
                        if (node[x] == NOTIFIED && (top == null || prio[x] > top)) top = prio[x];
                    }
                    for (int x : interestedOrder()) {
                        if (top != null && prio[x] < top) break;
                        if (notify(x, out)) break;
                    }
                }
            }
        }

        void setDesired(int c, List<Integer> out) {
            wants[c] = desired(c);
            queueSetDesired(c, wants[c], out);
            pulling[c] = false;
        }

        void settle(List<Integer> out) {
            while (true) {
                boolean did = false;
                for (int c = 0; c < n && !did; c++) {
                    if (registered[c] && wants[c] != desired(c)) {
                        setDesired(c, out);
                        did = true;
                    }
                }
                for (int j = 0; j < m && !did; j++) {
                    if (owed[j]) {
                        owed[j] = false;
                        if (status[j] == AVAILABLE) notifyConsumers(j, out);
                        did = true;
                    }
                }
                if (!did) return;
            }
        }

        void add(int c, List<Integer> out) {
            registered[c] = true;
            if (wants[c]) {
                moveTo(c, acq[c] ? INTERESTED : NON_ACQUIRING);
                notify(c, out);
            } else {
                moveTo(c, NOT_INTERESTED);
            }
        }

        void spend() {
            if (budget > 0) budget--;
        }

        // -- calls
        Object[] call(List<Object> action) throws NotEnabled, UnknownAction {
            if (action.isEmpty() || !(action.get(0) instanceof String)) throw new UnknownAction("no call name");
            String name = (String) action.get(0);
            List<Integer> out = new ArrayList<>();
            Object result = null;
            switch (name) {
                case "add_consumer": {
                    int c = consumer(action, 2);
                    need(node[c] == ABSENT, "consumer already added");
                    add(c, out);
                    break;
                }
                case "remove_consumer": {
                    int c = consumer(action, 2);
                    need(registered[c] && budget != 0 && removal, "remove not enabled");
                    spend();
                    registered[c] = false;
                    moveTo(c, REMOVED);
                    for (int j = 0; j < m; j++) {
                        if (status[j] == ACQ + c) {
                            status[j] = AVAILABLE;
                            owed[j] = true;
                        }
                    }
                    pulling[c] = false;
                    scheduled[c] = false;
                    if (removeHandsOver && anyAvailable()) notifyOthers(c, out);
                    break;
                }
                case "credit": {
                    int c = consumer(action, 2);
                    need(registered[c] && budget != 0 && credit[c] < maxCredit, "credit not enabled");
                    spend();
                    credit[c]++;
                    scheduled[c] = true;
                    break;
                }
                case "suspend":
                case "resume": {
                    int c = consumer(action, 3);
                    int r = reason(action.get(2));
                    boolean set = ((susp[c] >> r) & 1) != 0;
                    need(registered[c] && budget != 0 && (name.equals("suspend") ? !set : set), name + " not enabled");
                    spend();
                    susp[c] ^= 1 << r;
                    break;
                }
                case "enqueue":
                case "enqueue_held": {
                    int j = message(action);
                    need(status[j] == UNARRIVED && (j == 0 || status[j - 1] != UNARRIVED), "message cannot arrive");
                    if (name.equals("enqueue")) {
                        status[j] = AVAILABLE;
                        owed[j] = true;
                    } else {
                        need(held, "held messages are off");
                        status[j] = HELD;
                    }
                    break;
                }
                case "unhold": {
                    int j = message(action);
                    need(status[j] == HELD, "message not held");
                    status[j] = AVAILABLE;
                    owed[j] = true;
                    break;
                }
                case "release": {
                    int j = message(action);
                    need(release && budget != 0 && status[j] >= ACQ, "release not enabled");
                    spend();
                    result = (long) (status[j] - ACQ);
                    status[j] = AVAILABLE;
                    owed[j] = true;
                    break;
                }
                case "pull": {
                    int c = consumer(action, 2);
                    need(pulling[c] || (registered[c] && scheduled[c]), "consumer not scheduled");
                    scheduled[c] = false;
                    if (node[c] == NOTIFIED) moveTo(c, INTERESTED);
                    if (!wants[c]) {
                        pulling[c] = false;
                        break;
                    }
                    int j = next(c);
                    if (j >= 0 && (!acq[c] || noHigher(c)) && credit[c] > 0) {
                        if (acq[c]) status[j] = ACQ + c;
                        else seen[c] |= 1 << j;
                        credit[c]--;
                        if (acq[c] && node[c] == INTERESTED) moveTo(c, NOTIFIED);
                        pulling[c] = untilEmpty;
                        result = (long) j;
                    } else {
                        if (acq[c] && anyAvailable()) notifyOthers(c, out);
                        pulling[c] = false;
                    }
                    break;
                }
                default:
                    throw new UnknownAction("unknown call " + name);
            }
            settle(out);
            out.sort(null);
            List<Object> ids = new ArrayList<>();
            for (int c : out) ids.add((long) c);
            return new Object[] {result, ids};
        }

        static void need(boolean ok, String why) throws NotEnabled {
            if (!ok) throw new NotEnabled(why);
        }

        int consumer(List<Object> a, int size) throws UnknownAction {
            if (a.size() != size || !(a.get(1) instanceof Long)) throw new UnknownAction("bad parameters " + a);
            long c = (Long) a.get(1);
            if (c < 0 || c >= n) throw new UnknownAction("no consumer " + c);
            return (int) c;
        }

        int message(List<Object> a) throws UnknownAction {
            if (a.size() != 2 || !(a.get(1) instanceof Long)) throw new UnknownAction("bad parameters " + a);
            long j = (Long) a.get(1);
            if (j < 0 || j >= m) throw new UnknownAction("no message " + j);
            return (int) j;
        }

        int reason(Object r) throws UnknownAction, NotEnabled {
            for (int i = 0; i < REASONS.length; i++) {
                if (REASONS[i].equals(r)) {
                    need(i < reasons, "reason " + r + " is not toggled in this configuration");
                    return i;
                }
            }
            throw new UnknownAction("unknown reason " + r);
        }

        Map<String, Object> snapshot() {
            Map<String, Object> s = new LinkedHashMap<>();
            List<Object> cons = new ArrayList<>();
            for (int c = 0; c < n; c++) {
                List<Object> e = new ArrayList<>();
                e.add(NODE_NAMES[node[c]]);
                e.add((long) credit[c]);
                cons.add(e);
            }
            List<Object> msgs = new ArrayList<>();
            for (int j = 0; j < m; j++) {
                int st = status[j];
                msgs.add(st >= ACQ ? "acquired by c" + (st - ACQ) : new String[] {"unarrived", "available", "held"}[st]);
            }
            Map<String, Object> inter = new LinkedHashMap<>();
            for (Integer p : levels) {
                List<Integer> l = interested.get(p);
                if (!l.isEmpty()) {
                    List<Object> ids = new ArrayList<>();
                    for (int c : l) ids.add((long) c);
                    inter.put(Integer.toString(p), ids);
                }
            }
            s.put("consumers", cons);
            s.put("messages", msgs);
            s.put("interested", inter);
            return s;
        }
    }

    // ---------------------------------------------------------------- the protocol
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        Queue q = null;
        Map<String, Object> config = null;
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) continue;
            Object parsed;
            try {
                parsed = new Json(line).value();
            } catch (RuntimeException e) {
                send(out, error(0, 10, "invalid JSON: " + e.getMessage()));
                continue;
            }
            if (!(parsed instanceof Map)) {
                send(out, error(0, 10, "a message must be an object"));
                continue;
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> msg = (Map<String, Object>) parsed;
            long id = msg.get("id") instanceof Long ? (Long) msg.get("id") : 0;
            Object type = msg.get("type");
            Map<String, Object> reply = new LinkedHashMap<>();
            reply.put("id", id);
            try {
                if ("init".equals(type)) {
                    if (!"consumer-lists".equals(msg.get("model"))) {
                        send(out, error(id, 14, "this port implements consumer-lists only"));
                        continue;
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> cfg = (Map<String, Object>) msg.get("config");
                    try {
                        q = new Queue(cfg);
                    } catch (Unsupported e) {
                        send(out, error(id, 14, e.getMessage()));
                        continue;
                    }
                    config = cfg;
                    reply.put("type", "init_ok");
                    reply.put("implementation", "consumer-lists-java 0.1 (written from spec/ports/consumer-lists.md)");
                } else if ("shutdown".equals(type)) {
                    reply.put("type", "shutdown_ok");
                    send(out, reply);
                    return;
                } else if (q == null) {
                    send(out, error(id, 10, type + " before init"));
                    continue;
                } else if ("reset".equals(type)) {
                    q = new Queue(config);
                    reply.put("type", "reset_ok");
                } else if ("action".equals(type)) {
                    Object a = msg.get("action");
                    if (!(a instanceof List)) {
                        send(out, error(id, 10, "action must be an array"));
                        continue;
                    }
                    @SuppressWarnings("unchecked")
                    List<Object> action = (List<Object>) a;
                    Object[] obs;
                    try {
                        obs = q.call(action);
                    } catch (NotEnabled e) {
                        send(out, error(id, 13, e.getMessage()));
                        continue;
                    } catch (UnknownAction e) {
                        send(out, error(id, 12, e.getMessage()));
                        continue;
                    }
                    List<Object> o = new ArrayList<>();
                    o.add(obs[0]);
                    o.add(obs[1]);
                    reply.put("type", "action_ok");
                    reply.put("observation", o);
                } else if ("snapshot".equals(type)) {
                    reply.put("type", "snapshot_ok");
                    reply.put("state", q.snapshot());
                } else {
                    send(out, error(id, 11, "unknown message type " + type));
                    continue;
                }
            } catch (Exception e) {
                e.printStackTrace(System.err);
                Map<String, Object> err = error(id, 20, e.toString());
                send(out, err);
                continue;
            }
            send(out, reply);
        }
    }

    static Map<String, Object> error(long id, int code, String text) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("type", "error");
        e.put("id", id);
        e.put("code", (long) code);
        e.put("text", text);
        e.put("definite", code < 20);
        return e;
    }

    static void send(PrintStream out, Object msg) {
        StringBuilder sb = new StringBuilder();
        write(sb, msg);
        out.print(sb.append('\n'));
        out.flush();
    }

    // ---------------------------------------------------------------- tiny JSON
    static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            String s = (String) v;
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
                else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                else sb.append(ch);
            }
            sb.append('"');
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                write(sb, e.getKey().toString());
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object x : (List<?>) v) {
                if (!first) sb.append(',');
                first = false;
                write(sb, x);
            }
            sb.append(']');
        } else {
            sb.append(v.toString()); // Long, Double, Boolean
        }
    }

    static final class Json {
        final String s;
        int i;

        Json(String s) { this.s = s; }

        Object value() {
            Object v = parse();
            ws();
            if (i != s.length()) throw new RuntimeException("trailing characters at " + i);
            return v;
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        Object parse() {
            ws();
            if (i >= s.length()) throw new RuntimeException("unexpected end");
            char ch = s.charAt(i);
            if (ch == '{') {
                i++;
                Map<String, Object> m = new LinkedHashMap<>();
                ws();
                if (peek('}')) return m;
                while (true) {
                    ws();
                    Object k = parse();
                    if (!(k instanceof String)) throw new RuntimeException("object key must be a string");
                    ws();
                    expect(':');
                    m.put((String) k, parse());
                    ws();
                    if (peek('}')) return m;
                    expect(',');
                }
            }
            if (ch == '[') {
                i++;
                List<Object> l = new ArrayList<>();
                ws();
                if (peek(']')) return l;
                while (true) {
                    l.add(parse());
                    ws();
                    if (peek(']')) return l;
                    expect(',');
                }
            }
            if (ch == '"') {
                i++;
                StringBuilder sb = new StringBuilder();
                while (true) {
                    if (i >= s.length()) throw new RuntimeException("unterminated string");
                    char c = s.charAt(i++);
                    if (c == '"') return sb.toString();
                    if (c == '\\') {
                        char e = s.charAt(i++);
                        switch (e) {
                            case 'n': sb.append('\n'); break;
                            case 't': sb.append('\t'); break;
                            case 'r': sb.append('\r'); break;
                            case 'b': sb.append('\b'); break;
                            case 'f': sb.append('\f'); break;
                            case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                            default: sb.append(e);
                        }
                    } else {
                        sb.append(c);
                    }
                }
            }
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String t = s.substring(start, i);
            if (t.isEmpty()) throw new RuntimeException("unexpected character at " + start);
            if (t.contains(".") || t.contains("e") || t.contains("E")) return Double.parseDouble(t);
            return Long.parseLong(t);
        }

        boolean peek(char c) {
            if (i < s.length() && s.charAt(i) == c) { i++; return true; }
            return false;
        }

        void expect(char c) {
            if (!peek(c)) throw new RuntimeException("expected '" + c + "' at " + i);
        }
    }

    // ---------------------------------------------------------------- config helpers
    @SuppressWarnings("unchecked")
    static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    static long num(Object o) {
        return ((Number) o).longValue();
    }

    static boolean bool(Map<String, Object> cfg, String key, boolean dflt) {
        Object v = cfg.get(key);
        return v == null ? dflt : (Boolean) v;
    }
}
