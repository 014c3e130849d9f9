#!/usr/bin/env node
// A recovery-deferral port in JavaScript (Node.js >= 18, standard library only), written from the
// documents: spec/port-protocol.md (transport, messages, error codes) and
// spec/ports/recovery-deferral.md (calls, observations, snapshot, and the section "Thread level").
//
// It is a small concurrent feed listener in the shape of the odds-feed SDK's (seed 004): a feed
// thread that hands each event to the task queue of its match (bounded, waiting for room when
// full), a pool of workers (at most one per queue) calling the customer's listener, a task tracker
// counting pending tasks per recovery context, and a global listener that defers every "up"
// callback until its recovery context drained, polled by a scheduler. The threads are logical:
// each is an object that the checker moves one step at a time (at call level each call runs to a
// quiet point, at the thread level the checker steps each thread).
//
// Injected bugs for the tests (tests/conformance/test_node_rd_port.py), one at a time, chosen by
// the environment variable CONQ_NODE_BUG:
//   handoff-in-worker  a worker whose take makes room on the queue the feed thread waits for moves
//                      the waiting event into the queue itself ("direct hand-off"); the feed thread
//                      counts it in the tracker only when it runs again. Invisible at call level
//                      (the take and the feed thread's resumption are one call there); at the thread
//                      level the event is queued before the feed thread has run, uncounted: a worker
//                      may complete it first and the deferred up read 0 too early
//   down-keeps-deferred  a Down status does not cancel the producer's deferred up callbacks (the
//                      page: it does; upstream's DEV-011): a call-level bug, caught at both levels
//   stored-context-only  an up is correlated with the producer's stored recovery only, never with a
//                      newer one whose events came before its onRecoveryInitiated (upstream's rule,
//                      spec/deviations.md DEV-032): with config.late_initiation the up of such a recovery
//                      is delivered against the previous one, before the new one's events
'use strict';

const readline = require('readline');

const BUG = process.env.CONQ_NODE_BUG || '';
const KNOWN_BUGS = new Set(['', 'handoff-in-worker', 'down-keeps-deferred', 'stored-context-only']);
if (!KNOWN_BUGS.has(BUG)) {
  process.stderr.write(`node port: unknown CONQ_NODE_BUG=${BUG}\n`);
  process.exit(2);
}

class PortError extends Error {
  constructor(code, text) {
    super(text);
    this.code = code;
  }
}
const unknown = (text) => new PortError(12, text);
const disabled = (text) => new PortError(13, text);

// The "up" statuses (deferred until their context drained); every other status is a Down.
const UP_KINDS = new Set(['ProducerUp', 'FirstRecoveryCompleted', 'ProcessingQueDelayStabilized', 'ReturnedFromInactivity']);
const DOWN_KINDS = new Set(['AliveIntervalViolation', 'ProcessingQueueDelayViolation', 'PermanentlyUnavailable']);

// A seeded generator (mulberry32) for the port's own choices.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---------------------------------------------------------------------------------------------
// The event script: event e = [producer, match, kind]; its recovery and its recovery context.

class Event {
  constructor(index, [producer, match, kind]) {
    this.index = index;
    this.producer = producer;
    this.match = match;
    this.kind = kind;
    this.error = kind < 0;
    // the recovery whose initiation precedes the event (0: a live event, or an error of none)
    this.recovery = kind > 0 ? kind : kind < -1 ? -kind - 1 : 0;
    this.context = this.recovery === 0 ? 'NONE' : `p${producer}/r${this.recovery}`;
  }
}

// ---------------------------------------------------------------------------------------------
// TaskLifecycleTracker: pending tasks per recovery context.

class Tracker {
  constructor() {
    this.pending = new Map();
  }

  accepted(ctx) {
    this.pending.set(ctx, (this.pending.get(ctx) || 0) + 1);
  }

  completed(ctx) {
    this.pending.set(ctx, (this.pending.get(ctx) || 0) - 1);
  }

  count(ctx) {
    return this.pending.get(ctx) || 0;
  }

  snapshot() {
    const out = {};
    for (const [ctx, n] of [...this.pending.entries()].sort()) if (n !== 0) out[ctx] = n;
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// The task queues and their workers: bounded FIFO queues, at most one worker per queue, at most
// `workers` queues running at once. A worker thread's turn has two steps: take (the customer's
// listener is entered) and complete (it returns).

class Pool {
  constructor(cfg, tracker) {
    this.capacity = cfg.queue_size;
    this.workers = cfg.workers;
    this.queues = Array.from({ length: cfg.queues }, () => []);
    this.running = Array(cfg.queues).fill(null);
    this.tracker = tracker;
    this.roomWaiter = null; // the feed thread waiting for room: { queue, wake() }
  }

  hasRoom(q) {
    return this.queues[q].length < this.capacity;
  }

  busy() {
    return this.running.filter((e) => e !== null).length;
  }

  canTake(q) {
    return this.queues[q].length > 0 && this.running[q] === null && this.busy() < this.workers;
  }

  append(q, event) {
    this.queues[q].push(event);
  }

  // A worker takes the head task of q and enters the customer's listener; the room it makes wakes
  // the feed thread if it waits on q.
  take(q) {
    const event = this.queues[q].shift();
    this.running[q] = event;
    const w = this.roomWaiter;
    if (w !== null && w.queue === q) {
      this.roomWaiter = null;
      w.wake();
    }
    return event;
  }

  complete(q) {
    const event = this.running[q];
    this.running[q] = null;
    this.tracker.completed(event.context);
    return event;
  }
}

// ---------------------------------------------------------------------------------------------
// The feed thread: receives each producer's next event and hands it to its queue, or (legacy, or an
// error handled synchronously) calls the customer's listener itself. One event at a time; when the
// event's queue is full it counts the event and waits for room.

class FeedThread {
  constructor(system) {
    this.sys = system;
    this.waiting = null; // { event, queue, counted, woken }
  }

  receive(event) {
    const s = this.sys;
    const cfg = s.cfg;
    if (!cfg.enabled || (event.error && !cfg.handle_errors_async)) return ['feed-thread', event.index];
    // an event of a match goes to its match's queue; an error about no event to any queue
    const q = event.match >= 0 ? event.match % cfg.queues : Math.floor(s.random() * cfg.queues);
    if (s.pool.hasRoom(q)) {
      s.tracker.accepted(event.context);
      s.pool.append(q, event);
      return ['queued', q];
    }
    // full: wait for room (nothing is lost). The reference counts before waiting; with the bug the
    // count waits for the hand-off.
    const counted = BUG === 'handoff-in-worker' ? 0 : 1;
    if (counted) s.tracker.accepted(event.context);
    this.waiting = { event, queue: q, counted, woken: false };
    s.pool.roomWaiter = {
      queue: q,
      wake: () => {
        if (BUG === 'handoff-in-worker') {
          // the bug: the worker appends the waiting event itself, uncounted
          s.pool.append(q, event);
          this.waiting.handedOff = true;
        }
        this.waiting.woken = true;
      },
    };
    return ['blocked', q, counted];
  }

  // The feed thread runs again after room was made: it appends its event (and counts it if it did
  // not before it waited).
  resume() {
    const w = this.waiting;
    if (w === null || !w.woken) throw disabled('the feed thread is not woken on a queue with room');
    const s = this.sys;
    if (!w.counted) s.tracker.accepted(w.event.context);
    if (!w.handedOff) s.pool.append(w.queue, w.event);
    this.waiting = null;
    return ['queued', w.queue];
  }
}

// ---------------------------------------------------------------------------------------------
// The global listener: per producer its stored recovery context, the newest recovery it knows (the
// stored one, or a newer one whose resent event the feed thread received first: the page's known(p),
// DEV-032) and, per status callback of the current recovery epoch, its state and the recovery it was
// correlated with.

const notSent = () => ({ state: 'not-sent', request: 0 });

class GlobalListener {
  constructor(system) {
    this.sys = system;
    const cfg = system.cfg;
    this.rec = Array(cfg.producers).fill(0);
    this.seen = Array(cfg.producers).fill(0); // the newest recovery seen on a received event
    this.epoch = Array.from({ length: cfg.producers }, () => cfg.callbacks.map(notSent));
  }

  known(p) {
    return Math.max(this.rec[p], this.seen[p]);
  }

  // The feed thread received an event of recovery r (before it queues it or waits for room): the first
  // one of a recovery newer than any known starts that recovery's epoch; deferred callbacks stay.
  eventReceived(p, r) {
    if (r <= this.known(p)) return;
    this.seen[p] = r;
    this.epoch[p] = this.epoch[p].map((cb) => (cb.state === 'deferred' ? cb : notSent()));
  }

  onRecoveryInitiated(p) {
    const r = this.rec[p] + 1;
    const late = this.known(p) >= r; // its events came first: its epoch began with the first of them
    this.rec[p] = r;
    // every callback not sent again (a deferred one superseded with it), except, after a late
    // initiation, those the SDK made in this recovery's epoch
    this.epoch[p] = this.epoch[p].map((cb) => (late && cb.request === r && cb.state !== 'not-sent' ? cb : notSent()));
    return late ? 'forwarded-late' : 'forwarded';
  }

  // The recovery an up is correlated with: the newest known (with the bug, the stored one).
  correlation(p) {
    return BUG === 'stored-context-only' ? this.rec[p] : this.known(p);
  }

  onStatus(p, k) {
    const cfg = this.sys.cfg;
    const kind = cfg.callbacks[k];
    const cb = this.epoch[p][k];
    const up = UP_KINDS.has(kind);
    cb.request = this.correlation(p);
    if (!up && cfg.enabled && BUG !== 'down-keeps-deferred') {
      for (const other of this.epoch[p]) if (other.state === 'deferred') other.state = 'cancelled';
    }
    if (!up || !cfg.enabled || cb.request === 0) {
      cb.state = 'delivered';
      return 'forwarded';
    }
    cb.state = 'deferred';
    return 'deferred';
  }

  // One run of a deferred callback's task.
  poll(p, k) {
    const cb = this.epoch[p][k];
    const r = cb.request;
    if (this.correlation(p) > r) {
      // a newer recovery's event came before its onRecoveryInitiated: superseded (the SDK may make the
      // callback again in the new epoch)
      this.epoch[p][k] = notSent();
      return 'superseded';
    }
    const n = this.sys.tracker.count(r === 0 ? 'NONE' : `p${p}/r${r}`);
    if (n !== 0) return n;
    if (r !== this.rec[p]) return 'waits-initiation'; // its onRecoveryInitiated has not come yet
    cb.state = 'delivered';
    return 'delivered';
  }

  deferred(p) {
    return this.sys.cfg.callbacks.filter((_, k) => this.epoch[p][k].state === 'deferred').sort();
  }
}

// ---------------------------------------------------------------------------------------------
// The system under test, and its calls.

class System {
  constructor(cfg, seed) {
    this.cfg = cfg;
    this.random = rng(seed);
    this.events = cfg.events.map((e, i) => new Event(i, e));
    this.script = Array.from({ length: cfg.producers }, (_, p) => this.events.filter((e) => e.producer === p));
    this.fed = Array(cfg.producers).fill(0);
    this.tracker = new Tracker();
    this.pool = new Pool(cfg, this.tracker);
    this.feedThread = new FeedThread(this);
    this.global = new GlobalListener(this);
  }

  producer(p) {
    if (!Number.isInteger(p) || p < 0 || p >= this.cfg.producers) throw unknown(`no producer ${JSON.stringify(p)}`);
    return p;
  }

  queue(q) {
    if (!Number.isInteger(q) || q < 0 || q >= this.cfg.queues) throw unknown(`no queue ${JSON.stringify(q)}`);
    return q;
  }

  callback(k) {
    if (!Number.isInteger(k) || k < 0 || k >= this.cfg.callbacks.length) throw unknown(`no callback ${JSON.stringify(k)}`);
    return k;
  }

  // -- the environment ---------------------------------------------------------------------
  feed(p) {
    this.producer(p);
    if (this.feedThread.waiting !== null) throw disabled('the feed thread is waiting for room');
    const event = this.script[p][this.fed[p]];
    if (event === undefined) throw disabled(`producer ${p} has no event left`);
    // with late initiation the SDK may resend the next recovery's events before its onRecoveryInitiated
    const next = this.cfg.late_initiation ? 1 : 0;
    if (event.recovery > this.global.rec[p] + next) throw disabled(`event ${event.index} belongs to a recovery not initiated yet`);
    this.fed[p] += 1;
    this.global.eventReceived(p, event.recovery);
    return this.feedThread.receive(event);
  }

  recover(p) {
    this.producer(p);
    if (this.global.rec[p] >= this.cfg.recoveries) throw disabled(`producer ${p} has no recovery left`);
    return this.global.onRecoveryInitiated(p);
  }

  status(p, k) {
    this.producer(p);
    this.callback(k);
    const g = this.global;
    if (g.epoch[p][k].state !== 'not-sent') throw disabled(`callback ${k} of producer ${p} was sent in this epoch`);
    const r = g.known(p); // the SDK's recovery: with late initiation, possibly one not initiated yet
    if (r === 0 && !this.cfg.callbacks_without_recovery) throw disabled(`producer ${p} has no recovery yet`);
    if (UP_KINDS.has(this.cfg.callbacks[k]) && this.cfg.up_after_events && r > 0) {
      // after every event of the producer's current recovery context was fed (the one the feed
      // thread still holds, waiting for room, is not fed yet)
      const waiting = this.feedThread.waiting && this.feedThread.waiting.event;
      const ctx = `p${p}/r${r}`;
      const left = this.script[p].some((e, i) => e.context === ctx && (i >= this.fed[p] || e === waiting));
      if (left) throw disabled(`producer ${p}'s recovery ${r} has events not fed yet`);
    }
    return g.onStatus(p, k);
  }

  // -- the threads ----------------------------------------------------------------------------
  workerRun(q) {
    this.queue(q);
    if (!this.cfg.enabled) throw disabled('the legacy pipeline has no workers');
    if (!this.pool.canTake(q)) throw disabled(`no worker can take a task of queue ${q} now`);
    return ['listener', this.pool.take(q).index];
  }

  workerDone(q) {
    this.queue(q);
    if (this.pool.running[q] === null) throw disabled(`no task of queue ${q} runs`);
    this.pool.complete(q);
    return 'completed';
  }

  poll(p, k) {
    this.producer(p);
    this.callback(k);
    if (!this.cfg.enabled || this.global.epoch[p][k].state !== 'deferred') {
      throw disabled(`callback ${k} of producer ${p} is not deferred`);
    }
    return this.global.poll(p, k);
  }

  snapshot() {
    const w = this.feedThread.waiting;
    const out = {
      queues: this.pool.queues.map((q) => q.map((e) => e.index)),
      running: this.pool.running.map((e) => (e === null ? null : e.index)),
      pending: this.tracker.snapshot(),
      // the feed thread waits (woken or not) until it ran again
      feed_blocked: w === null ? null : w.queue,
    };
    if (this.cfg.enabled) {
      out.recovery = [...this.global.rec];
      out.deferred = this.global.rec.map((_, p) => this.global.deferred(p));
    } else {
      out.queues = this.pool.queues.map(() => []);
    }
    return out;
  }
}

// Call level: each call runs to a quiet point. A worker's take that wakes the feed thread lets it
// finish its hand-off in the same call.
class CallLevel {
  constructor(cfg, seed) {
    this.sys = new System(cfg, seed);
  }

  perform(action) {
    const [name, ...args] = action;
    const s = this.sys;
    const arity = { feed: 1, recover: 1, status: 2, run: 1, done: 1, poll: 2 }[name];
    if (arity === undefined || args.length !== arity) throw unknown(`unknown call ${JSON.stringify(action)}`);
    switch (name) {
      case 'feed': return s.feed(...args);
      case 'recover': return s.recover(...args);
      case 'status': return s.status(...args);
      case 'poll': return s.poll(...args);
      case 'done': return s.workerDone(...args);
      case 'run': {
        const obs = s.workerRun(...args);
        const w = s.feedThread.waiting;
        if (w !== null && w.woken) return [...obs, s.feedThread.resume()];
        return obs;
      }
      default: throw unknown(name);
    }
  }

  snapshot() {
    return this.sys.snapshot();
  }
}

// Thread level: the environment's calls, and one step of a named thread at a time; every
// observation is [label, result].
class ThreadLevel extends CallLevel {
  perform(action) {
    const [name, ...args] = action;
    const s = this.sys;
    if (name !== 'step') {
      if (!['feed', 'recover', 'status'].includes(name)) throw unknown(`not an environment action: ${JSON.stringify(action)}`);
      return [action, super.perform(action)];
    }
    const [thread, ...ids] = args;
    if (thread === 'worker' && ids.length === 1) {
      const q = s.queue(ids[0]);
      if (s.pool.running[q] !== null) return [['done', q], s.workerDone(q)];
      return [['run', q], s.workerRun(q)];
    }
    if (thread === 'feed' && ids.length === 1 && ids[0] === 0) {
      const w = s.feedThread.waiting;
      if (w === null) throw disabled('the feed thread does not wait');
      return [['feed', w.event.producer], s.feedThread.resume()];
    }
    if (thread === 'deferred' && ids.length === 2) return [['poll', ...ids], s.poll(...ids)];
    throw unknown(`unknown step ${JSON.stringify(action)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration: this port implements the reference switches only (the page: a port may refuse the
// others with error 14).

const REFERENCE_SWITCHES = {
  on_queue_full: 'block', no_context_producer_up: 'forward', error_routing: 'by_event', index_mod: 'floor',
  count_before_enqueue: true, track_error_tasks: true, down_cancels_deferred_up: true, replace_deferred: false,
  poll_then_deliver: false, forward_initiated_at_once: true, new_recovery_supersedes: true, correlate_with_events: true,
};

function readConfig(raw) {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new PortError(10, 'config must be an object');
  const cfg = { ...raw };
  for (const [k, v] of Object.entries(REFERENCE_SWITCHES)) {
    if (k in cfg && cfg[k] !== v) throw new PortError(14, `switch ${k}=${JSON.stringify(cfg[k])} is not implemented (only ${JSON.stringify(v)})`);
  }
  for (const k of ['producers', 'queues', 'workers', 'queue_size', 'recoveries']) {
    if (!Number.isInteger(cfg[k]) || cfg[k] < (k === 'recoveries' ? 0 : 1)) throw new PortError(14, `${k} must be a count`);
  }
  if (!Array.isArray(cfg.events) || !cfg.events.every((e) => Array.isArray(e) && e.length === 3 && e.every(Number.isInteger))) {
    throw new PortError(14, 'events must be [[producer, match, kind], ...]');
  }
  if (!Array.isArray(cfg.callbacks) || !cfg.callbacks.every((k) => UP_KINDS.has(k) || DOWN_KINDS.has(k))) {
    throw new PortError(14, `callbacks must name known statuses, got ${JSON.stringify(cfg.callbacks)}`);
  }
  for (const k of ['enabled', 'handle_errors_async', 'up_after_events', 'callbacks_without_recovery', 'late_initiation']) {
    if (typeof cfg[k] !== 'boolean') throw new PortError(14, `${k} must be true or false`);
  }
  return cfg;
}

// ---------------------------------------------------------------------------------------------
// The protocol loop (spec/port-protocol.md): one JSON object per line, one answer per request.

const IMPLEMENTATION = 'conq-node-rd-port 1.0' + (BUG ? ` (bug: ${BUG})` : '');
let cfg = null;
let level = 'call';
let system = null;
const build = (seed) => (level === 'thread' ? new ThreadLevel(cfg, seed) : new CallLevel(cfg, seed));

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n');
}

function handle(msg) {
  const id = msg.id;
  switch (msg.type) {
    case 'init': {
      if (msg.protocol !== 1) throw new PortError(14, `protocol ${msg.protocol} (this port speaks 1)`);
      if (msg.model !== 'recovery-deferral') throw new PortError(14, `model ${msg.model}`);
      if (msg.level !== undefined && msg.level !== 'call' && msg.level !== 'thread') throw new PortError(14, `level ${msg.level}`);
      if (!Number.isInteger(msg.seed)) throw new PortError(10, 'seed must be an integer');
      cfg = readConfig(msg.config);
      level = msg.level || 'call';
      system = build(msg.seed);
      const features = ['snapshot-in-reply'];
      if (level === 'thread') features.push('thread-steps');
      return { type: 'init_ok', id, implementation: IMPLEMENTATION, features };
    }
    case 'reset': {
      if (!cfg) throw new PortError(10, 'reset before init');
      if (!Number.isInteger(msg.seed)) throw new PortError(10, 'seed must be an integer');
      system = build(msg.seed);
      const reply = { type: 'reset_ok', id };
      if (msg.snapshot === true) reply.state = system.snapshot();
      return reply;
    }
    case 'action': {
      if (!system) throw new PortError(10, 'action before init');
      if (!Array.isArray(msg.action)) throw new PortError(10, 'action must be an array');
      const observation = system.perform(msg.action);
      const reply = { type: 'action_ok', id, observation };
      if (msg.snapshot === true) reply.state = system.snapshot();
      return reply;
    }
    case 'snapshot':
      if (!system) throw new PortError(10, 'snapshot before init');
      return { type: 'snapshot_ok', id, state: system.snapshot() };
    case 'shutdown':
      return { type: 'shutdown_ok', id };
    default:
      throw new PortError(11, `message type ${JSON.stringify(msg.type)}`);
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (err) {
    send({ type: 'error', id: 0, code: 10, text: `not JSON: ${err.message}`, definite: true });
    return;
  }
  if (msg === null || typeof msg !== 'object' || !Number.isInteger(msg.id)) {
    send({ type: 'error', id: 0, code: 10, text: 'a request is an object with an integer id', definite: true });
    return;
  }
  let reply;
  try {
    reply = handle(msg);
  } catch (err) {
    if (err instanceof PortError) {
      reply = { type: 'error', id: msg.id, code: err.code, text: err.message, definite: true };
    } else {
      process.stderr.write(`node port: ${err.stack}\n`);
      reply = { type: 'error', id: msg.id, code: 20, text: String(err), definite: false };
    }
  }
  send(reply);
  if (msg.type === 'shutdown') rl.close();
});
rl.on('close', () => process.exit(0));
