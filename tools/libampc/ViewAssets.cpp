//===- ViewAssets.cpp - The style sheet and script of `ampc view`'s page --===//
//
// The script (plain ES5, no library): a click on a node, a link of the cast
// list or the address `page.html#select=NAME` (NAME a value name such as
// %fc1, URL-encoded as %25fc1, or an element id such as op_3) fills the
// details panel from the page's JSON; the checkboxes hide the backward,
// optimizer and loss-scaling parts (every SVG element carries its role's
// class, r-backward, ...); the buttons, Ctrl+wheel, a double-click and the
// keys + - 0 zoom; dragging pans. The page opens at a readable zoom on the
// model's first nodes. On a folded page (a large graph) a click on a block
// instance's box lists what it holds, and a node's details link to its box.
//
//===----------------------------------------------------------------------===//
#include "ViewAssets.h"

namespace ampc::api {

const char kViewStyle[] = R"css(
html, body { height: 100%; }
body { margin: 0; font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  color: #222; display: flex; flex-direction: column; }
header { padding: 8px 14px; border-bottom: 1px solid #ddd; background: #fafafa; }
h1 { font-size: 18px; margin: 0 0 2px; }
h1 .sub { font-weight: normal; color: #666; font-size: 14px; }
h2 { font-size: 14px; margin: 12px 0 6px; }
.stats { margin-bottom: 4px; }
.stats span { font-weight: 600; }
.legend, .toggles { display: inline-block; margin-right: 18px; }
.swatch { display: inline-block; padding: 0 8px; margin-right: 6px; border: 1px solid #555;
  border-radius: 4px; }
.swatch.dt-f32 { background: #cfe2ff; } .swatch.dt-bf16 { background: #c9ecc9; }
.swatch.dt-f16 { background: #ffd8a8; } .swatch.dt-other { background: #e9ecef; }
.swatch.cast { border: 2px solid #c0392b; } .swatch.cacheable { border: 2px dashed #c0392b; }
.swatch.fold { border: 2px solid #555; box-shadow: 2px 2px 0 #888; }
.swatch.changed { border: 3px solid #7b2cbf; } .swatch.new { border: 2px dashed #7b2cbf; }
.toggles label { margin-right: 10px; }
#fold-note { margin: 4px 0 0; padding: 4px 8px; background: #fff4d6; border: 1px solid #e0b84c;
  border-radius: 4px; }
.zoom button { min-width: 28px; margin-left: 2px; }
#main { flex: 1; display: flex; min-height: 0; }
#graph { flex: 1; overflow: auto; background: #fff; cursor: grab; }
#graph.panning { cursor: grabbing; }
#graph svg { display: block; }
#zoom-level { display: inline-block; min-width: 3.5em; text-align: right;
  font-variant-numeric: tabular-nums; }
.zoom .hint { font-size: 11px; }
#side { width: 400px; flex: none; overflow: auto; border-left: 1px solid #ddd; padding: 0 12px 12px;
  background: #fcfcfc; }
g.node { cursor: pointer; }
g.node[data-diff=changed] path, g.node[data-diff=changed] polygon,
g.node[data-diff=changed] ellipse { stroke: #7b2cbf; stroke-width: 3px; }
g.node[data-diff=new] path, g.node[data-diff=new] polygon,
g.node[data-diff=new] ellipse { stroke: #7b2cbf; stroke-width: 2px; stroke-dasharray: 4 2; }
g.node.selected path, g.node.selected polygon, g.node.selected ellipse { stroke: #e0007a;
  stroke-width: 4px; }
body.hide-backward .r-backward, body.hide-optimizer .r-optimizer,
body.hide-loss_scale .r-loss_scale { display: none; }
table { border-collapse: collapse; }
td, th { padding: 1px 6px 1px 0; text-align: left; vertical-align: top; }
th { font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.props td:first-child { color: #666; white-space: nowrap; }
table.plan tr.group th { padding-top: 6px; color: #444; }
table.plan tr.total td, table.plan tr.peak td { font-weight: 600; }
table.plan tr.aside td { color: #777; }
.note, .hint { color: #666; }
.tag, .role { font-size: 11px; color: #666; }
ul.castlist { padding-left: 18px; margin: 4px 0; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
)css";

const char kViewScript[] = R"js(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('ampc-nodes').textContent);
  var idOfName = {};
  Object.keys(data).forEach(function (id) { idOfName[data[id].name] = id; });
  var details = document.getElementById('details');
  var svg = document.querySelector('#graph svg');
  var selected = null;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function bytes(b) {
    var s = String(b).replace(/\B(?=(\d{3})+(?!\d))/g, ',') + ' B';
    return b >= 1048576 ? s + ' (' + (b / 1048576).toFixed(2) + ' MiB)' :
           b >= 1024 ? s + ' (' + (b / 1024).toFixed(1) + ' KiB)' : s;
  }
  function shortBytes(b) {
    return b >= 1048576 ? (b / 1048576).toFixed(2) + ' MiB' :
           b >= 1024 ? (b / 1024).toFixed(1) + ' KiB' : b + ' B';
  }
  function row(table, key, value) {
    var tr = el('tr');
    tr.appendChild(el('td', key));
    var td = el('td');
    if (value instanceof Node) td.appendChild(value); else td.textContent = value;
    tr.appendChild(td);
    table.appendChild(tr);
  }
  // A value's name, a link to the node that makes it when it is drawn.
  function valueLink(name) {
    var id = idOfName[name];
    if (!id) return el('code', name);
    var a = el('a', name);
    a.href = '#select=' + encodeURIComponent(name);
    return a;
  }
  function values(title, list) {
    if (!list.length) return;
    details.appendChild(el('h2', title));
    var t = el('table', null, 'values');
    list.forEach(function (v) {
      var tr = el('tr');
      var td = el('td');
      td.appendChild(valueLink(v.name));
      tr.appendChild(td);
      tr.appendChild(el('td', v.type));
      tr.appendChild(el('td', shortBytes(v.bytes), 'num'));
      t.appendChild(tr);
    });
    details.appendChild(t);
  }

  function counts(list) {
    return list.map(function (kv) { return kv[0] + ' ' + kv[1]; }).join(', ');
  }
  // An element id's link, by the name its details are shown under.
  function idLink(id) {
    var d = data[id];
    if (!d) return el('code', id);
    var a = el('a', d.name);
    a.href = '#select=' + encodeURIComponent(id);
    return a;
  }
  // A folded block instance: what it computes in, its ops by kind, its
  // casts, then each node it holds, a link to the node's details.
  function showBlock(d, t) {
    row(t, 'role', d.role);
    row(t, 'block', d.block);
    row(t, 'precision', d.precision + (d.dtypes.length > 1 ? ' (' + counts(d.dtypes) + ')' : ''));
    var casts = d.casts.reduce(function (n, kv) { return n + kv[1]; }, 0);
    row(t, 'ops', d.ops.length + (casts ? ' (' + casts + ' casts)' : '') +
        (d.kinds.length ? ': ' + counts(d.kinds) : ''));
    if (d.casts.length) row(t, 'casts', counts(d.casts));
    details.appendChild(t);
    var held = d.ops.concat(d.inputs, d.state);
    if (!held.length) return;
    details.appendChild(el('h2', 'Holds'));
    var ul = el('ul', null, 'castlist');
    held.forEach(function (id) {
      var li = el('li');
      li.appendChild(idLink(id));
      if (data[id] && data[id].op) li.appendChild(document.createTextNode(' ' + data[id].op));
      ul.appendChild(li);
    });
    details.appendChild(ul);
  }

  function show(id) {
    var d = data[id];
    if (selected) selected.classList.remove('selected');
    selected = null;
    details.textContent = '';
    if (!d) {
      details.appendChild(el('h2', 'Node'));
      details.appendChild(el('p', 'no node ' + id + ' in this graph', 'note'));
      return;
    }
    // A node of a folded page is drawn in its block's box.
    selected = document.getElementById(id) || (d.box ? document.getElementById(d.box) : null);
    if (selected) selected.classList.add('selected');
    details.setAttribute('data-selected', d.name);
    details.appendChild(el('h2', d.name));
    var t = el('table', null, 'props');
    if (d.kind === 'op') {
      row(t, 'op', d.op);
      row(t, 'role', d.role);
      row(t, 'precision', d.precision);
      row(t, 'rule', d.reason);
      if (d.before)
        row(t, 'before', d.before);
      if (d.castFrom)
        row(t, 'cast', d.castFrom + ' \u2192 ' + d.castTo +
            (d.cacheable ? ' (of state: served from the cast cache)' : ''));
      row(t, 'source', d.location || 'unknown');
      if (d.box) row(t, 'drawn in', idLink(d.box));
      row(t, 'memory', bytes(d.bytes) + ' in ' + d.results.length +
          (d.results.length === 1 ? ' result' : ' results'));
      details.appendChild(t);
      values('Results', d.results);
      values('Operands', d.operands);
      if (d.attrs.length) {
        details.appendChild(el('h2', 'Attributes'));
        var a = el('table', null, 'props');
        d.attrs.forEach(function (kv) { row(a, kv[0], kv[1]); });
        details.appendChild(a);
      }
    } else if (d.kind === 'block') {
      showBlock(d, t);
    } else {
      row(t, 'kind', d.kind);
      row(t, 'type', d.type);
      row(t, 'memory', bytes(d.bytes));
      row(t, 'source', d.location || 'unknown');
      row(t, 'read by', d.users + (d.users === 1 ? ' node' : ' nodes'));
      if (d.box) row(t, 'drawn in', idLink(d.box));
      details.appendChild(t);
    }
    if (selected && selected.scrollIntoView)
      selected.scrollIntoView({block: 'center', inline: 'center'});
  }

  // #select=NAME: a value name (%fc1, or fc1) or an element id (op_3).
  function fromHash() {
    var m = /^#select=(.*)$/.exec(location.hash);
    if (!m) return;
    var key;
    try { key = decodeURIComponent(m[1]); } catch (e) { key = m[1]; }
    var id = data[key] ? key : idOfName[key] || idOfName['%' + key];
    show(id || key);
  }

  if (svg) {
    svg.addEventListener('click', function (e) {
      var g = e.target.closest ? e.target.closest('g.node') : null;
      if (!g || !data[g.id]) return;
      // A box by its id: a block's name may be a node's too.
      var key = data[g.id].kind === 'block' ? g.id : data[g.id].name;
      var target = '#select=' + encodeURIComponent(key);
      if (location.hash === target) show(g.id); else location.hash = target;
    });
  }
  window.addEventListener('hashchange', fromHash);

  Array.prototype.forEach.call(document.querySelectorAll('input[data-role]'), function (box) {
    box.addEventListener('change', function () {
      document.body.classList.toggle('hide-' + box.getAttribute('data-role'), !box.checked);
    });
  });

  // The view. Zoom resizes the SVG (its viewBox keeps the drawing); the
  // #graph pane scrolls to pan. Graphviz draws a zoo model's training graph
  // thousands of points wide and tall, mostly empty around its clusters:
  // at 100% and scrolled to its top-left corner a 1400x900 window showed
  // nothing of it. So the page opens at the whole width where that keeps
  // the labels readable, else at the smallest readable zoom, scrolled to
  // the model's first forward node, and is panned by dragging.
  var pane = document.getElementById('graph');
  var zoomLevel = document.getElementById('zoom-level');
  var PX_PER_PT = 4 / 3;
  // Labels are 10 pt: 0.75 draws them 10 px high, about the smallest
  // comfortable to read.
  var READABLE = 0.75;
  var scale = 1;
  var w0 = svg ? parseFloat(svg.getAttribute('width')) : 0;
  var h0 = svg ? parseFloat(svg.getAttribute('height')) : 0;
  function fitWidth() { return pane.clientWidth / (w0 * PX_PER_PT); }
  function setScale(s) {
    scale = Math.max(0.02, Math.min(s, 8));
    svg.setAttribute('width', (w0 * scale) + 'pt');
    svg.setAttribute('height', (h0 * scale) + 'pt');
    if (zoomLevel) zoomLevel.textContent = Math.round(scale * 100) + '%';
  }
  // Zoom to s, keeping the point of the drawing at (x, y) of the pane
  // (pixels from its top-left corner) where it is.
  function zoomAt(s, x, y) {
    if (!svg || !w0 || !h0) return;
    var at = svg.getBoundingClientRect(), box = pane.getBoundingClientRect();
    var dx = (box.left + x - at.left) / at.width, dy = (box.top + y - at.top) / at.height;
    setScale(s);
    at = svg.getBoundingClientRect();
    pane.scrollLeft += at.left + dx * at.width - (box.left + x);
    pane.scrollTop += at.top + dy * at.height - (box.top + y);
  }
  function zoomCentred(s) { zoomAt(s, pane.clientWidth / 2, pane.clientHeight / 2); }
  // Scrolls so that the box {left, top, right, bottom} (client pixels) is
  // centred across, its top a little below the pane's.
  function scrollToBox(b) {
    var box = pane.getBoundingClientRect();
    pane.scrollLeft += (b.left + b.right) / 2 - (box.left + pane.clientWidth / 2);
    pane.scrollTop += b.top - (box.top + Math.min(40, pane.clientHeight / 8));
  }
  // Element e's box, grown by the drawn operands it reads (a first node's
  // inputs and weights, drawn above it) while they fit the pane together.
  function withOperands(e) {
    var r = e.getBoundingClientRect();
    var b = {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
    var d = data[e.id];
    (d && d.operands || []).forEach(function (v) {
      var o = idOfName[v.name] && document.getElementById(idOfName[v.name]);
      if (!o) return;
      var q = o.getBoundingClientRect();
      if (!q.width) return;
      var u = {left: Math.min(b.left, q.left), top: Math.min(b.top, q.top),
               right: Math.max(b.right, q.right), bottom: Math.max(b.bottom, q.bottom)};
      if (u.right - u.left <= pane.clientWidth && u.bottom - u.top <= pane.clientHeight * 0.75)
        b = u;
    });
    return b;
  }
  // The model's start: the first forward node in execution order (op_<i>
  // is the i-th), else the first node.
  function firstNode() {
    var first = null;
    for (var i = 0; ; ++i) {
      var d = data['op_' + i];
      if (!d) break;
      var e = document.getElementById('op_' + i) || (d.box && document.getElementById(d.box));
      if (!e) continue;
      if (d.role === 'forward') return e;
      if (!first) first = e;
    }
    return first;
  }
  function initialView() {
    if (!svg || !w0 || !h0) return;
    setScale(Math.min(1, Math.max(fitWidth(), READABLE)));
    var first = firstNode();
    if (first) scrollToBox(withOperands(first));
  }

  Array.prototype.forEach.call(document.querySelectorAll('button[data-zoom]'), function (b) {
    b.addEventListener('click', function () {
      var how = b.getAttribute('data-zoom');
      if (how === 'in') zoomCentred(scale * 1.25);
      else if (how === 'out') zoomCentred(scale / 1.25);
      else zoomCentred(fitWidth());
    });
  });
  if (svg) {
    // Ctrl (or Cmd) + wheel zooms at the pointer; the wheel alone scrolls.
    pane.addEventListener('wheel', function (e) {
      if (!e.ctrlKey && !e.metaKey) return;
      e.preventDefault();
      var box = pane.getBoundingClientRect();
      zoomAt(scale * (e.deltaY < 0 ? 1.25 : 0.8), e.clientX - box.left, e.clientY - box.top);
    }, {passive: false});
    // A double-click off the nodes zooms in there (Shift: out).
    svg.addEventListener('dblclick', function (e) {
      if (e.target.closest && e.target.closest('g.node')) return;
      var box = pane.getBoundingClientRect();
      var s = e.shiftKey ? scale / 2 : Math.max(scale * 2, READABLE);
      zoomAt(s, e.clientX - box.left, e.clientY - box.top);
    });
    // Dragging the drawing pans it; a press on a node still selects it.
    var drag = null;
    svg.addEventListener('mousedown', function (e) {
      if (e.button !== 0 || (e.target.closest && e.target.closest('g.node'))) return;
      drag = {x: e.clientX, y: e.clientY, left: pane.scrollLeft, top: pane.scrollTop};
      pane.classList.add('panning');
      e.preventDefault();
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      pane.scrollLeft = drag.left - (e.clientX - drag.x);
      pane.scrollTop = drag.top - (e.clientY - drag.y);
    });
    window.addEventListener('mouseup', function () {
      drag = null;
      pane.classList.remove('panning');
    });
    window.addEventListener('keydown', function (e) {
      if (e.ctrlKey || e.metaKey || e.altKey || /^(INPUT|TEXTAREA)$/.test(e.target.tagName)) return;
      if (e.key === '+' || e.key === '=') zoomCentred(scale * 1.25);
      else if (e.key === '-') zoomCentred(scale / 1.25);
      else if (e.key === '0') zoomCentred(fitWidth());
    });
  }

  initialView();
  fromHash();
})();
)js";

} // namespace ampc::api
