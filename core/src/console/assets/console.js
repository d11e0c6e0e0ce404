// The webhook console's only script (served from the console itself, no
// inline code): refresh the live part of the page while the tab is visible,
// select rows, confirm destructive actions.
(function () {
  'use strict';
  var every = parseInt(document.body.getAttribute('data-refresh') || '0', 10);
  // One refresh at a time: a slow page (a store under load) is not asked
  // for again every few seconds while the last request is still running.
  var inFlight = false;

  function busy() {
    var active = document.activeElement;
    return document.querySelector('input[name=key]:checked') !== null ||
      (active !== null && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName));
  }

  function refresh() {
    if (inFlight || document.visibilityState !== 'visible' || busy()) { return; }
    inFlight = true;
    fetch(location.href, { credentials: 'same-origin' })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null || busy()) { return; }
        var fresh = new DOMParser().parseFromString(text, 'text/html').getElementById('live');
        var current = document.getElementById('live');
        if (fresh !== null && current !== null) {
          // Keep what the reader opened (the activity table) open, and
          // what they typed (a selector to pause) typed.
          current.querySelectorAll('details[open]').forEach(function (d) {
            var twin = d.id ? fresh.querySelector('#' + d.id) : null;
            if (twin !== null) { twin.open = true; }
          });
          current.querySelectorAll('input[type=text][id]').forEach(function (i) {
            var twin = fresh.querySelector('#' + i.id);
            if (twin !== null) { twin.setAttribute('value', i.value); }
          });
          current.replaceWith(fresh);
          update();
        }
      })
      .catch(function () {})
      .then(function () { inFlight = false; });
  }

  function update() {
    var boxes = document.querySelectorAll('input[name=key]');
    var checked = document.querySelectorAll('input[name=key]:checked').length;
    document.querySelectorAll('[data-needs-selection]').forEach(function (b) { b.disabled = checked === 0; });
    document.querySelectorAll('[data-selected-count]').forEach(function (s) { s.textContent = String(checked); });
    document.querySelectorAll('input[data-select-all]').forEach(function (all) {
      all.checked = boxes.length > 0 && checked === boxes.length;
    });
  }

  document.addEventListener('change', function (e) {
    var t = e.target;
    if (t.hasAttribute && t.hasAttribute('data-select-all')) {
      document.querySelectorAll('input[name=key]').forEach(function (b) { b.checked = t.checked; });
    }
    update();
  });

  document.addEventListener('click', function (e) {
    var t = e.target;
    var message = t.getAttribute && t.getAttribute('data-confirm');
    if (message && !window.confirm(message)) { e.preventDefault(); }
  });

  if (every > 0) { setInterval(refresh, every * 1000); }
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && every > 0) { refresh(); }
  });
  update();
}());
