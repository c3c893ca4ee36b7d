// MathJax 3 settings, loaded before MathJax itself (mkdocs.yml extra_javascript). `\(...\)` and `\[...\]` are
// what pymdownx.arithmatex makes of the Markdown pages' `$...$` and `$$...$$`; the notebooks' Markdown cells
// reach the page with their `$` delimiters as written. Code blocks are never typeset.
window.MathJax = {
  tex: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
  },
};
