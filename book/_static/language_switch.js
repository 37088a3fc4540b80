// The language switch keeps the reader's place. The page's switch (at its top) is also put
// in the article's header bar, which stays in view while the page scrolls; clicked, either
// leads to the section the reader is in (the last whose heading is above the top quarter
// of the window), in the other language.
// Both books give a section the same anchor (its English heading's), so the same #id
// finds it there.
(function () {
  function addToHeader() {
    var link = document.querySelector("p.language-switch a");
    var bar = document.querySelector(".article-header-buttons");
    if (!link || !bar || bar.querySelector(".language-switch-button")) return;
    var copy = link.cloneNode(true);
    copy.className = "btn btn-sm language-switch-button";
    copy.textContent = link.getAttribute("hreflang") === "en" ? "EN" : "中文";
    copy.title = link.textContent;
    bar.insertBefore(copy, bar.firstChild);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addToHeader);
  } else {
    addToHeader();
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest &&
      event.target.closest("p.language-switch a, a.language-switch-button");
    if (!link) return;
    var sections = document.querySelectorAll("main section[id]");
    var here = "", line = window.innerHeight / 4;
    sections.forEach(function (section) {
      if (section.getBoundingClientRect().top <= line) here = section.id;
    });
    if (sections.length && here === sections[0].id) here = "";   // at the page's top
    link.href = link.href.split("#")[0] + (here ? "#" + here : "");
  });
})();
