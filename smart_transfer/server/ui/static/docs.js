// The API page's only script of our own (served as a file: the Content-Security-Policy allows no inline
// script). Swagger UI, from the packaged copy this server serves, shows the OpenAPI document the page's
// links pick (?doc=sharing: the Delta Sharing routes'); it asks no other site for anything (no validator
// badge). Its base layout: the standalone one's top bar draws a logo with an inline style element.
"use strict";

const DOCUMENTS = { server: "/openapi.json", sharing: "/delta-sharing/openapi.json" };

window.addEventListener("load", () => {
  const wanted = new URLSearchParams(window.location.search).get("doc");
  const doc = Object.hasOwn(DOCUMENTS, wanted) ? wanted : "server";
  document.getElementById(`doc-${doc}`).setAttribute("aria-current", "page");
  window.ui = SwaggerUIBundle({
    url: DOCUMENTS[doc],
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
