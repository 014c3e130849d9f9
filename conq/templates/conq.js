/* conq pages: draw a state split into its parts, the changed fields highlighted (the same parts
   and changes as model/engines/changes.py computes: this only draws them).  No libraries, no network. */
"use strict";
var conq = (function () {
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function json(v) { return v === undefined ? "absent" : JSON.stringify(v); }
  /* the leaves of a part, as model/engines/changes.py walks them: mappings by key, lists of mappings by
     position; a list of plain values is one leaf */
  function leaves(value, path, out) {
    if (value !== null && typeof value === "object" && !Array.isArray(value) && (Object.keys(value).length || path)) {
      Object.keys(value).forEach(function (k) { leaves(value[k], path && k ? path + "." + k : (k || path), out); });
    } else if (Array.isArray(value) && value.length && value.every(function (x) { return x !== null && typeof x === "object" && !Array.isArray(x); })) {
      value.forEach(function (v, i) { leaves(v, path + "[" + i + "]", out); });
    } else {
      out.push([path, value]);
    }
    return out;
  }
  /* the state (part name -> value) as boxes, one per part, the changed fields highlighted */
  function drawState(target, parts, changes) {
    target.textContent = "";
    changes = changes || [];
    Object.keys(parts).forEach(function (name) {
      var mine = changes.filter(function (c) { return c.part === name; });
      var box = el("div", "part");
      box.setAttribute("data-part", name);
      if (mine.length) box.classList.add("touched");
      box.appendChild(el("h4", null, name));
      var table = el("table");
      leaves(parts[name], "", []).forEach(function (leaf) {
        var tr = el("tr");
        tr.appendChild(el("td", "key", leaf[0] === "" ? "value" : leaf[0]));
        var td = el("td", "val", json(leaf[1]));
        td.setAttribute("data-field", leaf[0]);
        if (mine.some(function (c) { return c.field === leaf[0]; })) td.classList.add("changed");
        tr.appendChild(td);
        table.appendChild(tr);
      });
      box.appendChild(table);
      target.appendChild(box);
    });
  }
  /* the changes of one step as a list: part.field before -> after */
  function drawChanges(target, changes) {
    target.textContent = "";
    if (!changes.length) { target.appendChild(el("li", "muted", "nothing changed")); return; }
    changes.forEach(function (c) {
      var li = el("li", "change");
      li.appendChild(el("span", "field", c.part + (c.field ? "." + c.field : "") + " "));
      li.appendChild(el("span", "before", json(c.before)));
      li.appendChild(document.createTextNode(" → "));
      li.appendChild(el("span", "after", json(c.after)));
      target.appendChild(li);
    });
  }
  function changeText(changes) {
    return changes.map(function (c) { return c.part + (c.field ? "." + c.field : "") + " " + json(c.before) + " → " + json(c.after); }).join(", ");
  }
  /* one counterexample viewer: a slider over its steps (0: the initial state) */
  function viewer(box) {
    var data = JSON.parse(document.getElementById(box.getAttribute("data-trail")).textContent);
    var n = data.steps.length;
    /* each step carries only the parts it changed: the full state after step k is built once */
    var full = [data.init];
    data.steps.forEach(function (s, i) {
      var prev = full[i], next = {};
      (s.order || Object.keys(prev).concat(Object.keys(s.parts).filter(function (k) { return !(k in prev); })))
        .forEach(function (k) { if (s.gone.indexOf(k) < 0) next[k] = (k in s.parts) ? s.parts[k] : prev[k]; });
      full.push(next);
    });
    var slider = box.querySelector("input.cx-slider"), pos = box.querySelector(".cx-pos");
    var head = box.querySelector(".cx-step-head"), list = box.querySelector("ul.changes");
    var state = box.querySelector(".state"), steps = box.querySelector("ol.cx-steps");
    slider.max = String(n);
    data.steps.forEach(function (s, i) {
      var li = el("li");
      li.setAttribute("data-step", String(i + 1));
      li.appendChild(el("span", "n", s.n + ". "));
      li.appendChild(el("span", "actor", s.actor));
      li.appendChild(document.createTextNode(" → " + s.target + ": "));
      li.appendChild(el("code", null, s.label));
      li.appendChild(el("div", "chg", changeText(s.changes) || "nothing changed"));
      li.addEventListener("click", function () { show(i + 1); });
      steps.appendChild(li);
    });
    function show(k) {
      k = Math.max(0, Math.min(n, k));
      slider.value = String(k);
      box.setAttribute("data-current", String(k));
      pos.textContent = "step " + k + " of " + n;
      Array.prototype.forEach.call(steps.children, function (li, i) { li.classList.toggle("current", i + 1 === k); });
      if (k === 0) {
        head.textContent = "initial state";
        drawChanges(list, []);
        drawState(state, data.init, []);
        return;
      }
      var s = data.steps[k - 1];
      var cyc = data.cycle_start !== null && k > data.cycle_start;
      head.textContent = "";
      if (cyc) head.appendChild(el("span", "cx-cycle", "↺ cycle (repeats forever) · "));
      head.appendChild(document.createTextNode(s.n + ". " + s.actor + " → " + s.target + ": " + s.label));
      drawChanges(list, s.changes);
      drawState(state, full[k], s.changes);
    }
    slider.addEventListener("input", function () { show(parseInt(slider.value, 10)); });
    box.querySelector(".cx-prev").addEventListener("click", function () { show(parseInt(slider.value, 10) - 1); });
    box.querySelector(".cx-next").addEventListener("click", function () { show(parseInt(slider.value, 10) + 1); });
    show(0);
  }
  return { el: el, json: json, drawState: drawState, drawChanges: drawChanges, changeText: changeText, viewer: viewer };
})();
