// The numbers among a result's outputs (a line's count_in and count_out, a property's count),
// and their rendering as a <dl>: shared by the stream page and the review page's tiles.

/** The result's numeric outputs, by name. */
export function numbersOf(result) {
  return Object.fromEntries(
    Object.entries(result?.serialized_output_data ?? {}).filter(([, value]) => typeof value === "number"),
  );
}

/** Fills `list` (a <dl>) with one term and value per count. */
export function renderCounts(list, counts) {
  list.replaceChildren(
    ...Object.entries(counts).flatMap(([name, value]) => {
      const term = document.createElement("dt");
      term.textContent = name.replaceAll("_", " ");
      const detail = document.createElement("dd");
      detail.textContent = String(value);
      return [term, detail];
    }),
  );
}
