// The web view's only script (served as a file: the Content-Security-Policy allows no inline script).
// Copy buttons copy the text of the element they name; the filter box hides the list's rows that do
// not match while typing (submitting it filters on the server, across pages).
"use strict";

function copyText(button) {
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.textContent;
  const done = () => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = label; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => selectText(source));
  } else {
    selectText(source);
  }
}

function selectText(element) {
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

function filterRows(input) {
  const table = document.getElementById(input.dataset.filterTable);
  if (!table) return;
  const wanted = input.value.trim().toLowerCase();
  for (const row of table.tBodies[0].rows) {
    row.hidden = wanted !== "" && !row.dataset.name.toLowerCase().includes(wanted);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", () => copyText(button));
  }
  for (const input of document.querySelectorAll("input[data-filter-table]")) {
    input.addEventListener("input", () => filterRows(input));
  }
});
