// What the page clips or pushes sideways at its current width: the page wider than the window,
// a box whose content is wider than itself (text cut), a select whose widest option does not fit.
() => {
  const found = [];
  const root = document.documentElement;
  if (root.scrollWidth > innerWidth + 1) found.push(`page ${root.scrollWidth} > ${innerWidth}`);
  const boxes = document.querySelectorAll("footer, header, fieldset, .tile, #status span");
  for (const box of boxes) {
    if (box.offsetParent === null) continue;
    if (box.scrollWidth > box.clientWidth + 1) {
      const name = box.id || box.className || box.tagName;
      found.push(`${name} ${box.scrollWidth} > ${box.clientWidth}`);
    }
  }
  const pen = document.createElement("canvas").getContext("2d");
  // Camera names are the browser's, of any length: that control cuts them, its options' tooltips
  // have them whole.
  for (const select of document.querySelectorAll("select:not(#device)")) {
    if (select.offsetParent === null) continue;
    pen.font = getComputedStyle(select).font;
    for (const option of select.options) {
      const width = pen.measureText(option.text).width;
      // The arrow and the padding take about 2.2rem of the control.
      if (width + 36 > select.clientWidth) {
        found.push(`#${select.id}: "${option.text}" ${Math.round(width)} + 36 > ${select.clientWidth}`);
      }
    }
  }
  return found;
}
