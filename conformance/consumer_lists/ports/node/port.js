#!/usr/bin/env node
// One file: a port is what an author copies to start a port in another language, one file with no build step.
// A consumer-lists port in JavaScript (Node.js >= 18, standard library only), written from the
// documents alone: spec/port-protocol.md (transport, messages, error codes) and
// spec/ports/consumer-lists.md (calls, procedures, observation and snapshot shapes).
//
// It is a small queue with a consumer manager in the shape of Qpid Broker-J's
// QueueConsumerManagerImpl (All / NotInterested / Interested-per-priority / Notified / NonAcquiring
// lists), consumer targets with credit and suspension reasons (AbstractConsumerTarget's
// notifyWorkDesired flag), an IO-thread wake-up bit per consumer, a publisher's owed notifyConsumers
// per message, the housekeeping thread's waiting deletes, rejects and message groups. The checker
// drives it one API call at a time; each call runs to completion, and the work it leaves behind
// (owed notifications, target flag changes, a group pointer reset) is drained by `settle()` the way
// the owning threads would run it before the next call (spec/ports/consumer-lists.md, **settle**).
//
// Injected bugs for the test suite (tests/conformance/test_node_port.py), one at a time, chosen by
// the environment variable CONQ_NODE_BUG:
//   lower-priority-first   the Interested lists are walked from the lowest priority up
//   notify-all             a publisher's notifyConsumers does not stop at the first acquirer notified
//   no-handover-on-remove  removeConsumer hands the removed consumer's wake-up to nobody
//   renotify-if-more-work  after a delivery the consumer goes back to Notified only when another
//                          entry is there for it (spec/consumer-lists.md's `deliver`: "always")
//   unnotify-after-scan    (thread level) a pull moves its consumer Notified -> Interested only when
//                          it looks for an entry, not when it starts: a notification that arrives in
//                          between is lost (issue 17: not catchable at call level)
'use strict';

const readline = require('readline');

const BUG = process.env.CONQ_NODE_BUG || '';
const KNOWN_BUGS = new Set(['', 'lower-priority-first', 'notify-all', 'no-handover-on-remove',
  'renotify-if-more-work', 'unnotify-after-scan']);
if (!KNOWN_BUGS.has(BUG)) {
  process.stderr.write(`node port: unknown CONQ_NODE_BUG=${BUG}\n`);
  process.exit(2);
}

const REASON_NAMES = ['flow', 'tcp'];

// Node states of QueueConsumerNode, spelled as the snapshot spells them.
const ABSENT = 'absent';
const NOT_INTERESTED = 'not-interested';
const INTERESTED = 'interested';
const NOTIFIED = 'notified';
const NON_ACQUIRING = 'non-acquiring';
const REMOVED = 'removed';

class PortError extends Error {
  constructor(code, text) {
    super(text);
    this.code = code;
  }
}
const unknown = (text) => new PortError(12, text);
const disabled = (text) => new PortError(13, text);

// ---------------------------------------------------------------------------------------------
// The consumer: its target (credit, suspension reasons, notifyWorkDesired), its IO thread's wake-up
// bit and pull loop, and the queue-side node whose state says which list it is in.

class Consumer {
  constructor(id, priority, acquires, initialCredit) {
    this.id = id;
    this.priority = priority;
    this.acquires = acquires; // false: a browser
    this.node = ABSENT;
    this.credit = initialCredit;
    this.reasons = new Set(); // suspension reasons in force
    this.wants = initialCredit > 0; // the target's notifyWorkDesired flag
    this.scheduled = false; // the IO thread has a wake-up pending
    this.pulling = false; // the IO thread goes on pulling (pull until empty)
    this.seen = new Set(); // browsers: messages already given
  }

  get registered() {
    return this.node !== ABSENT && this.node !== REMOVED;
  }

  // what the target's flag should say: credit left and no suspension reason
  desired() {
    return this.credit > 0 && this.reasons.size === 0;
  }
}

// ---------------------------------------------------------------------------------------------
// QueueConsumerManagerImpl: the lists. Interested is one ordered list per priority level (a
// consumer entering goes to the tail); the others are sets (their order decides nothing).

class ConsumerManager {
  constructor() {
    this.all = new Set();
    this.notInterested = new Set();
    this.interested = new Map(); // priority -> array of consumers, head first
    this.notified = new Set();
    this.nonAcquiring = new Set();
  }

  _leave(c) {
    this.notInterested.delete(c);
    this.notified.delete(c);
    this.nonAcquiring.delete(c);
    const list = this.interested.get(c.priority);
    if (list) {
      const i = list.indexOf(c);
      if (i >= 0) list.splice(i, 1);
      if (list.length === 0) this.interested.delete(c.priority);
    }
  }

  _enter(c, state) {
    this._leave(c);
    c.node = state;
    if (state === NOT_INTERESTED) this.notInterested.add(c);
    else if (state === NOTIFIED) this.notified.add(c);
    else if (state === NON_ACQUIRING) this.nonAcquiring.add(c);
    else if (state === INTERESTED) {
      if (!this.interested.has(c.priority)) this.interested.set(c.priority, []);
      this.interested.get(c.priority).push(c);
    }
  }

  add(c, wantsWork) {
    this.all.add(c);
    this._enter(c, wantsWork ? (c.acquires ? INTERESTED : NON_ACQUIRING) : NOT_INTERESTED);
  }

  remove(c) {
    this.all.delete(c);
    this._leave(c);
    c.node = REMOVED;
  }

  // Interested -> Notified (an acquirer being told of work)
  setNotified(c) {
    if (c.node !== INTERESTED) return false;
    this._enter(c, NOTIFIED);
    return true;
  }

  // Notified -> Interested, to the tail of its level (the IO thread starts a pull)
  setUnnotified(c) {
    if (c.node !== NOTIFIED) return false;
    this._enter(c, INTERESTED);
    return true;
  }

  makeInterested(c) {
    if (c.node !== NOT_INTERESTED) return false;
    this._enter(c, c.acquires ? INTERESTED : NON_ACQUIRING);
    return true;
  }

  makeNotInterested(c) {
    const wanting = c.acquires ? c.node === INTERESTED || c.node === NOTIFIED : c.node === NON_ACQUIRING;
    if (!wanting) return false;
    this._enter(c, NOT_INTERESTED);
    return true;
  }

  // every interested consumer: levels from the highest priority down, each list head to tail
  interestedOrder() {
    const levels = [...this.interested.keys()].sort((a, b) => b - a);
    if (BUG === 'lower-priority-first') levels.reverse();
    const out = [];
    for (const p of levels) out.push(...this.interested.get(p));
    return out;
  }

  highestNotifiedPriority() {
    let top = null;
    for (const c of this.notified) if (top === null || c.priority > top) top = c.priority;
    return top;
  }
}

// ---------------------------------------------------------------------------------------------
// A queue entry (message) and the message-group managers.

class Entry {
  constructor(id, group) {
    this.id = id;
    this.group = group; // -1: no group
    this.state = 'unarrived'; // unarrived | held | available | acquired | deleted
    this.holder = null; // the consumer that acquired it
    this.rejectedBy = new Set(); // consumer ids (QueueEntryImpl._rejectedBy)
  }

  status() {
    return this.state === 'acquired' ? `acquired by c${this.holder.id}` : this.state;
  }
}

class Group {
  constructor(id) {
    this.id = id;
    this.owner = null; // a Consumer
    this.counted = new Set(); // shared policy: entry ids whose acquisition the group counted
  }
}

// ---------------------------------------------------------------------------------------------
// The queue: entries, the consumer manager, the threads' owed work.

class Queue {
  constructor(cfg) {
    this.cfg = cfg;
    this.budget = cfg.env_budget;
    this.consumers = cfg.consumers.map(([prio, acq], id) => new Consumer(id, prio, acq, cfg.initial_credit));
    const groupOf = (j) => (cfg.groups.length ? cfg.groups[j] : -1);
    this.entries = Array.from({ length: cfg.messages }, (_, j) => new Entry(j, groupOf(j)));
    const ngroups = cfg.groups.reduce((m, g) => Math.max(m, g + 1), 0);
    this.groups = Array.from({ length: ngroups }, (_, g) => new Group(g));
    this.manager = new ConsumerManager();
    this.owedNotify = new Set(); // entries whose publisher still owes notifyConsumers
    this.deleteWaiting = new Set(); // entries a delete waits for (held)
    this.resetOwed = false; // a group pointer reset is owed
    this.notifiedLog = []; // consumers notified during the current call
    if (cfg.preadded) {
      for (const c of this.consumers) this._addConsumer(c);
      this.notifiedLog = [];
    }
  }

  // -- reading the queue ----------------------------------------------------------------------

  anyAvailable() {
    return this.entries.some((e) => e.state === 'available');
  }

  groupValid(g) {
    if (g.owner === null) return false;
    if (this.cfg.group_policy === 'assigned') return true;
    return g.owner.registered || g.counted.size > 0;
  }

  // getNextAvailableEntry: the lowest available entry this consumer may take
  nextFor(c) {
    if (!c.registered) return null;
    for (const e of this.entries) {
      if (e.state !== 'available') continue;
      if (!c.acquires && c.seen.has(e.id)) continue;
      if (this.cfg.reject && e.rejectedBy.has(c.id)) continue;
      if (c.acquires && e.group >= 0) {
        const g = this.groups[e.group];
        if (g.owner !== c && this.groupValid(g)) continue;
      }
      return e;
    }
    return null;
  }

  // noHigherPriorityWithCredit(c, entry)
  noHigher(c, entry) {
    if (!this.cfg.priority_check) return true;
    for (const h of this.consumers) {
      if (!h.registered || !h.acquires || h.priority <= c.priority || !h.wants) continue;
      if (entry && this.cfg.reject && entry.rejectedBy.has(h.id)) continue;
      if (this.nextFor(h) !== null) return false;
    }
    return true;
  }

  // -- notification -----------------------------------------------------------------------------

  // notifyConsumer: an acquirer is moved Interested -> Notified only if it could take something now;
  // a browser is always woken.
  // The priority check is made for the entry the consumer would take (its rejecters do not hold a
  // lower consumer back), as attemptDelivery makes it: see GAPS.md, entries 3 and 4.
  notify(c) {
    if (c.acquires) {
      const next = this.nextFor(c);
      if (next === null || !this.noHigher(c, next) || c.node !== INTERESTED) return false;
      this.manager.setNotified(c);
    }
    c.scheduled = true;
    this.notifiedLog.push(c.id);
    return true;
  }

  // the publisher's notifyConsumers for entry e
  notifyConsumers(e) {
    for (const b of this.consumers) {
      if (b.node === NON_ACQUIRING && !b.seen.has(e.id)) this.notify(b);
    }
    for (const c of this.manager.interestedOrder()) {
      if (e.state !== 'available') break;
      if (this.cfg.reject && e.rejectedBy.has(c.id)) continue;
      if (this.notify(c)) {
        if (this.cfg.notify_one && BUG !== 'notify-all') break;
      } else if (!this.noHigher(c, e)) {
        break;
      }
    }
  }

  // notifyOtherConsumers(except)
  notifyOthers(except) {
    for (const x of this.manager.interestedOrder()) {
      if (!this.anyAvailable()) break;
      if (x !== except && this.notify(x)) break;
    }
  }

  // the queue's half of setNotifyWorkDesired
  queueSetDesired(c, desired) {
    if (desired) {
      if (this.manager.makeInterested(c)) this.notify(c);
      return;
    }
    if (!this.manager.makeNotInterested(c)) return;
    const top = this.manager.highestNotifiedPriority();
    for (const x of this.manager.interestedOrder()) {
      if (top !== null && x.priority < top) break;
      if (this.notify(x)) break;
    }
  }

  // the IO thread's AbstractConsumerTarget.setNotifyWorkDesired
  targetSetDesired(c) {
    const d = c.desired();
    if (this.cfg.flag_before_queue) {
      c.wants = d;
      this.queueSetDesired(c, d);
    } else {
      this.queueSetDesired(c, d);
      c.wants = d;
    }
    c.pulling = false;
  }

  // -- groups -----------------------------------------------------------------------------------

  groupLeft(e) {
    if (e.group < 0 || this.cfg.group_policy !== 'shared') return;
    const g = this.groups[e.group];
    if (!g.counted.delete(e.id)) return;
    if (g.counted.size === 0) {
      g.owner = null;
      if (this.entries.some((x) => x.group === g.id && x.state === 'available')) this.resetOwed = true;
    }
  }

  // acceptMessage: the group manager's assignment together with the acquire
  accept(c, e) {
    if (e.group >= 0) {
      const g = this.groups[e.group];
      if (g.owner !== c) {
        if (this.groupValid(g)) return false;
        g.owner = c;
      }
      if (this.cfg.group_policy === 'shared') g.counted.add(e.id);
    }
    e.state = 'acquired';
    e.holder = c;
    return true;
  }

  resetGroups() {
    this.resetOwed = false;
    for (const c of this.consumers) if (c.registered && c.acquires) this.notify(c);
  }

  // -- entries changing state -------------------------------------------------------------------

  requeue(e) {
    e.state = 'available';
    e.holder = null;
    this.owedNotify.add(e.id);
    this.groupLeft(e);
  }

  dequeue(e) {
    const wasAcquired = e.state === 'acquired';
    e.state = 'deleted';
    e.holder = null;
    if (wasAcquired) this.groupLeft(e);
    if (this.anyAvailable() && this.cfg.delete_notifies) this.notifyOthers(null);
  }

  // -- the end of a call: every thread runs what it owes ----------------------------------------

  settle() {
    for (;;) {
      const waiting = [...this.deleteWaiting].sort((a, b) => a - b).find((j) => this.entries[j].state === 'available');
      if (waiting !== undefined) {
        this.deleteWaiting.delete(waiting);
        this.dequeue(this.entries[waiting]);
        continue;
      }
      const flagger = this.consumers.find((c) => c.registered && c.wants !== c.desired());
      if (flagger) {
        this.targetSetDesired(flagger);
        continue;
      }
      if (this.owedNotify.size) {
        const j = Math.min(...this.owedNotify);
        this.owedNotify.delete(j);
        if (this.entries[j].state === 'available') this.notifyConsumers(this.entries[j]);
        continue;
      }
      if (this.resetOwed) {
        this.resetGroups();
        continue;
      }
      return;
    }
  }

  takeBudget() {
    if (this.budget > 0) this.budget -= 1;
  }

  // -- the API calls ----------------------------------------------------------------------------

  _addConsumer(c) {
    this.manager.add(c, c.wants);
    if (c.wants) this.notify(c);
    this.settle();
  }

  addConsumer(c) {
    if (c.node !== ABSENT) throw disabled(`consumer ${c.id} was already added`);
    this._addConsumer(c);
    return null;
  }

  removeConsumer(c) {
    if (!this.cfg.removal) throw disabled('removal is off');
    if (!c.registered) throw disabled(`consumer ${c.id} is not registered`);
    if (this.budget === 0) throw disabled('environment budget spent');
    this.takeBudget();
    const wasNotified = c.node === NOTIFIED;
    this.manager.remove(c);
    const released = this.entries.filter((e) => e.state === 'acquired' && e.holder === c);
    for (const e of released) {
      e.state = 'available';
      e.holder = null;
      this.owedNotify.add(e.id);
    }
    for (const e of released) this.groupLeft(e);
    if (this.groups.length) {
      for (const g of this.groups) {
        if (g.owner !== c) continue;
        if (this.entries.some((e) => e.group === g.id && e.state === 'available')) this.resetOwed = true;
      }
      if (this.cfg.group_policy === 'assigned') for (const g of this.groups) if (g.owner === c) g.owner = null;
    }
    c.pulling = false;
    c.scheduled = false;
    const handOver = this.cfg.remove_hands_over && (!this.cfg.handover_only_if_notified || wasNotified);
    if (this.anyAvailable() && handOver && BUG !== 'no-handover-on-remove') this.notifyOthers(c);
    this.settle();
    return null;
  }

  grantCredit(c) {
    if (!c.registered) throw disabled(`consumer ${c.id} is not registered`);
    if (this.budget === 0) throw disabled('environment budget spent');
    if (c.credit >= this.cfg.max_credit) throw disabled('credit at its maximum');
    this.takeBudget();
    c.credit += 1;
    c.scheduled = true; // the credit manager wakes the target
    this.settle();
    return null;
  }

  suspend(c, reason, on) {
    if (!c.registered) throw disabled(`consumer ${c.id} is not registered`);
    if (this.budget === 0) throw disabled('environment budget spent');
    if (c.reasons.has(reason) === on) throw disabled(`reason ${reason} is ${on ? 'already' : 'not'} in force`);
    this.takeBudget();
    if (on) c.reasons.add(reason);
    else c.reasons.delete(reason);
    this.settle();
    return null;
  }

  _arrivalEnabled(e) {
    return e.state === 'unarrived' && (e.id === 0 || this.entries[e.id - 1].state !== 'unarrived');
  }

  enqueue(e) {
    if (!this._arrivalEnabled(e)) throw disabled(`message ${e.id} cannot arrive now`);
    e.state = 'available';
    this.owedNotify.add(e.id);
    this.settle();
    return null;
  }

  enqueueHeld(e) {
    if (!this.cfg.held) throw disabled('held messages are off');
    if (!this._arrivalEnabled(e)) throw disabled(`message ${e.id} cannot arrive now`);
    e.state = 'held';
    this.settle();
    return null;
  }

  unhold(e) {
    if (e.state !== 'held') throw disabled(`message ${e.id} is not held`);
    e.state = 'available';
    this.owedNotify.add(e.id);
    this.settle();
    return null;
  }

  release(e) {
    if (!this.cfg.release) throw disabled('release is off');
    if (this.budget === 0) throw disabled('environment budget spent');
    if (e.state !== 'acquired') throw disabled(`message ${e.id} is not acquired`);
    this.takeBudget();
    const holder = e.holder.id;
    this.requeue(e);
    this.settle();
    return holder;
  }

  reject(c, e) {
    if (!this.cfg.reject) throw disabled('reject is off');
    if (this.budget === 0) throw disabled('environment budget spent');
    if (!c.registered || e.state !== 'acquired' || e.holder !== c) throw disabled(`message ${e.id} is not acquired by c${c.id}`);
    this.takeBudget();
    e.rejectedBy.add(c.id);
    this.requeue(e);
    this.settle();
    return null;
  }

  deleteEntry(e) {
    if (!this.cfg.expiry) throw disabled('expiry is off');
    if (this.deleteWaiting.has(e.id)) throw disabled(`a delete already waits for message ${e.id}`);
    let result;
    if (e.state === 'available') {
      result = null;
      this.dequeue(e);
    } else if (e.state === 'acquired') {
      result = e.holder.id; // stolen: at call level every acquisition was sent
      this.dequeue(e);
    } else if (e.state === 'held') {
      result = 'held';
      this.deleteWaiting.add(e.id);
    } else {
      throw disabled(`message ${e.id} is ${e.state}`);
    }
    this.settle();
    return result;
  }

  // one deliverSingleMessage of c's IO thread
  pull(c) {
    if (!(c.pulling || (c.registered && c.scheduled))) throw disabled(`consumer ${c.id} has nothing to do`);
    c.scheduled = false;
    if (BUG !== 'unnotify-after-scan') this.manager.setUnnotified(c);
    let result = null;
    if (!c.wants) {
      if (BUG === 'unnotify-after-scan') this.manager.setUnnotified(c);
      c.pulling = false;
    } else {
      const e = this.nextFor(c);
      if (BUG === 'unnotify-after-scan') this.manager.setUnnotified(c); // after the scan: no one can tell here
      const mayTake = e !== null && c.credit > 0 &&
        (c.acquires ? this.noHigher(c, e) : !this.cfg.priority_blocks_browsers || this.noHigher(c, e));
      if (mayTake && (!c.acquires || this.accept(c, e))) {
        if (!c.acquires) c.seen.add(e.id);
        c.credit -= 1;
        // back to Notified after every delivery, whether or not more work is there
        if (c.acquires && (BUG !== 'renotify-if-more-work' || this.nextFor(c) !== null)) this.manager.setNotified(c);
        c.pulling = this.cfg.pull_rule !== 'once';
        result = e.id;
      } else {
        if (c.acquires && this.anyAvailable()) this.notifyOthers(c);
        c.pulling = false;
      }
    }
    this.settle();
    return result;
  }

  // -- the observe() view -----------------------------------------------------------------------

  snapshot() {
    const interested = {};
    for (const [p, list] of this.manager.interested) if (list.length) interested[String(p)] = list.map((c) => c.id);
    const s = {
      consumers: this.consumers.map((c) => [c.node, c.credit]),
      messages: this.entries.map((e) => e.status()),
      interested,
    };
    if (this.cfg.reject) s.rejected_by = this.entries.map((e) => [...e.rejectedBy].sort((a, b) => a - b));
    if (this.cfg.expiry) s.delete_waiting = [...this.deleteWaiting].sort((a, b) => a - b);
    if (this.groups.length) {
      s.groups = this.groups.map((g) => (g.owner === null ? null : g.owner.id));
      s.group_reset_owed = this.resetOwed;
    }
    return s;
  }

  // -- dispatch ---------------------------------------------------------------------------------

  perform(action) {
    if (!Array.isArray(action) || typeof action[0] !== 'string') throw unknown('an action is [name, param, ...]');
    const [name, ...args] = action;
    const arity = { add_consumer: 1, remove_consumer: 1, credit: 1, suspend: 2, resume: 2, enqueue: 1, enqueue_held: 1,
      unhold: 1, release: 1, reject: 2, delete_entry: 1, pull: 1 }[name];
    if (arity === undefined) throw unknown(`unknown call ${JSON.stringify(name)}`);
    if (args.length !== arity) throw unknown(`${name} takes ${arity} parameter(s)`);
    const consumer = (x) => {
      if (!Number.isInteger(x) || x < 0 || x >= this.consumers.length) throw unknown(`no consumer ${JSON.stringify(x)}`);
      return this.consumers[x];
    };
    const entry = (x) => {
      if (!Number.isInteger(x) || x < 0 || x >= this.entries.length) throw unknown(`no message ${JSON.stringify(x)}`);
      return this.entries[x];
    };
    const reason = (r) => {
      const i = REASON_NAMES.indexOf(r);
      if (i < 0) throw unknown(`no reason ${JSON.stringify(r)}`);
      if (i >= this.cfg.reasons) throw disabled(`reason ${r} is not toggled in this configuration`);
      return r;
    };
    this.notifiedLog = [];
    let result;
    switch (name) {
      case 'add_consumer': result = this.addConsumer(consumer(args[0])); break;
      case 'remove_consumer': result = this.removeConsumer(consumer(args[0])); break;
      case 'credit': result = this.grantCredit(consumer(args[0])); break;
      case 'suspend': result = this.suspend(consumer(args[0]), reason(args[1]), true); break;
      case 'resume': result = this.suspend(consumer(args[0]), reason(args[1]), false); break;
      case 'enqueue': result = this.enqueue(entry(args[0])); break;
      case 'enqueue_held': result = this.enqueueHeld(entry(args[0])); break;
      case 'unhold': result = this.unhold(entry(args[0])); break;
      case 'release': result = this.release(entry(args[0])); break;
      case 'reject': result = this.reject(consumer(args[0]), entry(args[1])); break;
      case 'delete_entry': result = this.deleteEntry(entry(args[0])); break;
      case 'pull': result = this.pull(consumer(args[0])); break;
    }
    return [result, [...this.notifiedLog].sort((a, b) => a - b)];
  }
}

// ---------------------------------------------------------------------------------------------
// The thread level (spec/ports/consumer-lists.md, "Thread level"): the same queue, but the checker
// runs each thread to its next scheduling point. An environment action is its own step alone; the
// notification an arrival owes waits for its publisher thread; a consumer's IO thread stops between
// deliverSingleMessage's parts (un-notify, find, acquire, deliver or no_message) and between the
// two halves of setNotifyWorkDesired (target_flag, set_notify_work_desired), which it runs when its
// target's flag differs from what it should say, before it pulls again (the page: "where both a pull
// and this half could run, the model allows either first"; this port always runs the half first).

class ThreadedQueue extends Queue {
  constructor(cfg) {
    super(cfg);
    for (const c of this.consumers) {
      c.pc = 'idle'; // idle | find | acquire | deliver | no_message | desire (the second half is next)
      c.found = null; // the entry find_next_available chose
    }
  }

  settle() {
    // nothing runs by itself at this level: every thread waits for the checker
  }

  // deliverSingleMessage, first part: the wake-up is consumed and the node un-notified before looking
  _ioStart(c) {
    c.scheduled = false;
    c.pulling = false;
    if (BUG !== 'unnotify-after-scan') this.manager.setUnnotified(c);
    if (!c.wants) return 'suspended';
    c.pc = 'find';
    return null;
  }

  _ioFind(c) {
    if (BUG === 'unnotify-after-scan') this.manager.setUnnotified(c);
    const e = this.nextFor(c);
    // the credit is only allocated here: it is taken (and the snapshot shows it) at the acquire
    if (e !== null && c.credit > 0 && (!c.acquires || this.noHigher(c, e))) {
      c.found = e;
      c.pc = 'acquire';
      return true;
    }
    c.pc = 'no_message';
    return false;
  }

  _ioAcquire(c) {
    const e = c.found;
    // a browser takes a reference, not the entry: it succeeds while the entry exists, even if an
    // acquirer took it since the find (the reference's `acquire` row; GAPS.md entry 11)
    const ok = c.acquires ? e.state === 'available' && this.accept(c, e) : e.state !== 'deleted';
    if (ok) {
      if (!c.acquires) c.seen.add(e.id);
      c.credit -= 1;
      c.pc = 'deliver';
      return true;
    }
    c.found = null;
    c.pc = 'no_message';
    return false;
  }

  _ioDeliver(c) {
    const e = c.found;
    c.found = null;
    if (c.acquires) this.manager.setNotified(c);
    c.pulling = this.cfg.pull_rule !== 'once';
    c.pc = 'idle';
    return e.id;
  }

  _ioNoMessage(c) {
    if (c.acquires && this.anyAvailable()) this.notifyOthers(c);
    c.pulling = false;
    c.pc = 'idle';
    return null;
  }

  // setNotifyWorkDesired is owed: the flag differs from what it should say (credit used up by a
  // delivery, or given back by `credit`), and the IO thread is between pulls
  _desireOwed(c) {
    return c.pc === 'desire' || (c.pc === 'idle' && c.registered && c.wants !== c.desired());
  }

  // setNotifyWorkDesired, first half: the target's flag (the reference order, flag_before_queue)
  _ioFlag(c) {
    c.wants = c.desired();
    c.pc = 'desire';
    return [['target_flag', c.id, c.wants], null];
  }

  // second half: the queue is told; the IO thread is idle after it (it stops pulling)
  _ioQueueDesired(c) {
    this.queueSetDesired(c, c.wants);
    c.pulling = false;
    c.pc = 'idle';
    return [['set_notify_work_desired', c.id, c.wants], null];
  }

  stepIo(c) {
    switch (c.pc) {
      case 'find': return [['find_next_available', c.id], this._ioFind(c)];
      case 'acquire': return [['acquire', c.id], this._ioAcquire(c)];
      case 'deliver': return [['deliver', c.id], this._ioDeliver(c)];
      case 'no_message': return [['no_message', c.id], this._ioNoMessage(c)];
      case 'desire': return this._ioQueueDesired(c);
      default:
        if (this._desireOwed(c)) return this._ioFlag(c);
        if (!(c.pulling || (c.registered && c.scheduled))) throw disabled(`consumer ${c.id}'s IO thread has no step now`);
        return [['deliver_single_message', c.id], this._ioStart(c)];
    }
  }

  stepPublisher(e) {
    if (!this.owedNotify.has(e.id)) throw disabled(`the publisher of message ${e.id} owes nothing`);
    this.owedNotify.delete(e.id);
    if (e.state === 'available') this.notifyConsumers(e);
    return [['notify_consumers', e.id], null];
  }

  perform(action) {
    if (!Array.isArray(action) || typeof action[0] !== 'string') throw unknown('an action is [name, param, ...]');
    const [name, ...args] = action;
    if (name === 'step') {
      if (args.length !== 2) throw unknown('step takes a thread kind and an id');
      const [kind, x] = args;
      this.notifiedLog = [];
      let label, result;
      if (kind === 'io') {
        if (!Number.isInteger(x) || x < 0 || x >= this.consumers.length) throw unknown(`no consumer ${JSON.stringify(x)}`);
        [label, result] = this.stepIo(this.consumers[x]);
      } else if (kind === 'publisher') {
        if (!Number.isInteger(x) || x < 0 || x >= this.entries.length) throw unknown(`no message ${JSON.stringify(x)}`);
        [label, result] = this.stepPublisher(this.entries[x]);
      } else {
        throw unknown(`no thread kind ${JSON.stringify(kind)}`);
      }
      return [label, result, [...this.notifiedLog].sort((a, b) => a - b)];
    }
    if (!['add_consumer', 'enqueue', 'enqueue_held', 'unhold', 'credit', 'suspend', 'resume'].includes(name)) {
      throw unknown(`${JSON.stringify(name)} is not an environment action of the thread level`);
    }
    if (['credit', 'suspend', 'resume'].includes(name) && Number.isInteger(args[0]) && args[0] >= 0 &&
        args[0] < this.consumers.length) {
      const c = this.consumers[args[0]];
      // the page: not offered while the consumer's setNotifyWorkDesired is owed or half done, and a
      // suspend or resume not in the middle of a pull either
      if (this._desireOwed(c)) throw disabled(`consumer ${c.id}'s setNotifyWorkDesired is owed or under way`);
      if (name !== 'credit' && c.pc !== 'idle') throw disabled(`consumer ${c.id} is in the middle of a pull`);
    }
    const [result, notified] = super.perform(action);
    return [action, result, notified];
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the fields the port reads, with the reference values of the switches as defaults.

const DEFAULTS = {
  consumers: [[2, true], [1, true], [1, false]], messages: 3, initial_credit: 1, max_credit: 1, reasons: 1,
  held: false, release: true, env_budget: 1, preadded: true, removal: true, pull_rule: 'until-empty',
  flag_before_queue: true, unnotify_first: true, clear_wake_first: true, notify_one: true, priority_check: true,
  priority_blocks_browsers: false, remove_hands_over: true, acquire_cas: true, expiry: false, reject: false,
  groups: [], group_policy: 'shared', delete_notifies: true, group_assign_with_acquire: true,
  group_refuses_closed: true, handover_only_if_notified: false,
};

function readConfig(raw) {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new PortError(10, 'config must be an object');
  const cfg = { ...DEFAULTS, ...raw };
  if (!Array.isArray(cfg.consumers) || !cfg.consumers.every((c) => Array.isArray(c) && c.length === 2 &&
      Number.isInteger(c[0]) && typeof c[1] === 'boolean')) throw new PortError(14, 'consumers must be [[priority, acquires], ...]');
  if (!Number.isInteger(cfg.messages) || cfg.messages < 0) throw new PortError(14, 'messages must be a count');
  if (!Array.isArray(cfg.groups) || (cfg.groups.length && cfg.groups.length !== cfg.messages)) {
    throw new PortError(14, 'groups must name one group (or -1) per message');
  }
  if (!['shared', 'assigned'].includes(cfg.group_policy)) throw new PortError(14, `group_policy ${cfg.group_policy}`);
  if (!['until-empty', 'once'].includes(cfg.pull_rule)) throw new PortError(14, `pull_rule ${cfg.pull_rule}`);
  if (!(cfg.reasons >= 0 && cfg.reasons <= REASON_NAMES.length)) throw new PortError(14, `reasons ${cfg.reasons}`);
  // switches this port does not model away from their reference values: the thread-step order
  // inside a pull is fixed (a call runs to completion), so these change nothing it could show
  for (const k of ['unnotify_first', 'clear_wake_first', 'acquire_cas', 'group_assign_with_acquire', 'group_refuses_closed']) {
    if (cfg[k] !== true) throw new PortError(14, `switch ${k}=${JSON.stringify(cfg[k])} is not implemented`);
  }
  return cfg;
}

// ---------------------------------------------------------------------------------------------
// The protocol loop (spec/port-protocol.md): one JSON object per line, one answer per request.

const IMPLEMENTATION = 'conq-node-port 1.0' + (BUG ? ` (bug: ${BUG})` : '');
let cfg = null;
let level = 'call';
let queue = null;
const build = () => (level === 'thread' ? new ThreadedQueue(cfg) : new Queue(cfg));

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n');
}

function handle(msg) {
  const id = msg.id;
  switch (msg.type) {
    case 'init': {
      if (msg.protocol !== 1) throw new PortError(14, `protocol ${msg.protocol} (this port speaks 1)`);
      if (msg.model !== 'consumer-lists') throw new PortError(14, `model ${msg.model}`);
      if (msg.level !== undefined && msg.level !== 'call' && msg.level !== 'thread') throw new PortError(14, `level ${msg.level}`);
      cfg = readConfig(msg.config);
      level = msg.level || 'call';
      queue = build();
      const features = ['snapshot-in-reply'];
      if (level === 'thread') features.push('thread-steps');
      return { type: 'init_ok', id, implementation: IMPLEMENTATION, features };
    }
    case 'reset': {
      if (!cfg) throw new PortError(10, 'reset before init');
      queue = build();
      const reply = { type: 'reset_ok', id };
      if (msg.snapshot === true) reply.state = queue.snapshot();
      return reply;
    }
    case 'action': {
      if (!queue) throw new PortError(10, 'action before init');
      if (!Array.isArray(msg.action)) throw new PortError(10, 'action must be an array');
      const observation = queue.perform(msg.action);
      const reply = { type: 'action_ok', id, observation };
      if (msg.snapshot === true) reply.state = queue.snapshot();
      return reply;
    }
    case 'snapshot':
      if (!queue) throw new PortError(10, 'snapshot before init');
      return { type: 'snapshot_ok', id, state: queue.snapshot() };
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
  if (msg.type === 'shutdown') {
    rl.close();
  }
});
rl.on('close', () => process.exit(0));
