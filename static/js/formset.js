/* "Add a row" buttons of the lab's formsets, Django's management-form pattern: a click
   clones the formset's empty_form (its <template>), numbers the copy with TOTAL_FORMS in
   place of __prefix__, and counts it in TOTAL_FORMS. One listener on the document serves
   every formset of the page. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-formset-add]");
    if (!button || !button.form) return;
    var form = button.form;
    var prefix = button.getAttribute("data-formset-add");
    var total = form.querySelector('input[name="' + prefix + '-TOTAL_FORMS"]');
    var max = parseInt(form.querySelector('input[name="' + prefix + '-MAX_NUM_FORMS"]').value, 10);
    var empty = form.querySelector('template[data-formset-empty="' + prefix + '"]');
    var rows = form.querySelector('[data-formset-rows="' + prefix + '"]');
    var index = parseInt(total.value, 10);
    if (index >= max) return;
    rows.insertAdjacentHTML("beforeend", empty.innerHTML.replace(/__prefix__/g, String(index)));
    total.value = String(index + 1);
    button.disabled = index + 1 >= max;
    var first = rows.lastElementChild.querySelector("input:not([type=hidden]), select");
    if (first) first.focus();
  });
})();
