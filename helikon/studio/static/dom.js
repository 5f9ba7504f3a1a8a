// helikon studio: the one way the page's scripts build elements. Loaded first;
// every string is set with textContent, never parsed as HTML.
"use strict";

// A URL of the studio's API, relative to the page (the studio may be mounted under a prefix).
const api = (path) => new URL(path, new URL(".", document.baseURI));

// An element with attributes ("text" sets its text, "class" its classes) and children.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}
