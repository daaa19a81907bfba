// Niceties only: every page works without this script.
(function () {
  "use strict";

  // Copy buttons: hidden until this script runs, since they need it.
  document.querySelectorAll("[data-copy-target]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy-target"));
    if (!target) return;
    button.hidden = false;
    var label = button.textContent;
    button.addEventListener("click", function () {
      var text = target.textContent.trim();
      var done = function (ok) {
        button.textContent = ok ? "Copied" : "Press Ctrl+C to copy";
        button.classList.toggle("copied", ok);
        setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 2500);
      };
      select(target);
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
      } else {
        done(false);
      }
    });
  });

  function select(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // A form sends once: a second click while the first is on its way would
  // rotate twice.
  document.querySelectorAll("form[method=post]").forEach(function (form) {
    form.addEventListener("submit", function () {
      form.querySelectorAll("button[type=submit]").forEach(function (b) {
        setTimeout(function () { b.disabled = true; }, 0);
      });
    });
  });
})();
