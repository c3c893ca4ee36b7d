"""mkdocs hooks (``hooks:`` in mkdocs.yml): what the site takes from outside ``docs/``, at build time.

* The executed notebooks ``tutorials/*.ipynb`` and ``paper_repro/*.ipynb`` are added to the site's files under
  their repository paths (``tutorials/01_transformer_is_an_ode.ipynb``), before mkdocs-jupyter's ``on_files``
  turns them into pages; nothing is copied into ``docs/``.
* A page links a notebook by its repository path relative to the page's file, which GitHub follows; the link is
  rewritten to the notebook's page on the site.
* ``<!-- claims:counts -->`` in a page is replaced by README.md's verdict-count table (the block between its
  ``claims`` markers, which ``python -m paper_repro.claims --write`` keeps), with each ledger link pointing at
  the paper's rendered reproduction notebook instead.
* The package's docstrings cross-reference with Sphinx roles (``:class:`~neuralode_tf.fields.SplitField```,
  ``:meth:`bind```), which mkdocstrings renders as text. Once every page is rendered, each role becomes a link
  to the documented object it names (a relative name is looked up from the object whose docstring holds it
  outwards) or, where nothing documented matches, plain code.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIRS = ("tutorials", "paper_repro")
_START, _END = "<!-- claims:start -->", "<!-- claims:end -->"
_NOTEBOOK_LINK = re.compile(r"\]\(([^)#\s]+\.ipynb)(#[^)\s]*)?\)")
_LEDGER_LINK = re.compile(r"\]\(paper_repro/claims/(\w+)\.toml\)")
_LEDGER_PAGES = {"depth_dynamics": "guide/dynamics.md"}  # ledgers without a notebook: the page that explains them
# A role as mkdocstrings renders it: ``:class:<code>~a.b.C</code>`` or ``:meth:<code>Title &lt;a.b.c&gt;</code>``.
_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):<code>(?:([^<&]+?) &lt;)?(~?)([\w.]+)(?:&gt;)?</code>")
_OBJECT_ID = re.compile(r'id="(neuralode_tf(?:\.\w+)*)"')


@event_priority(100)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files: Files, config) -> Files:
    for folder in NOTEBOOK_DIRS:
        for notebook in sorted((ROOT / folder).glob("*.ipynb")):
            path = f"{folder}/{notebook.name}"
            files.append(File(path, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    markdown = _notebook_links_on_the_site(markdown, page.file.src_uri)
    if "<!-- claims:counts -->" not in markdown:
        return markdown
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(_START, 1)[1].split(_END, 1)[0].strip()
    here = posixpath.dirname(page.file.src_uri)
    def target(key: str) -> str:
        return posixpath.relpath(_LEDGER_PAGES.get(key, f"paper_repro/{key}.ipynb"), here or ".")

    block = _LEDGER_LINK.sub(lambda m: f"]({target(m[1])})", block)
    return markdown.replace("<!-- claims:counts -->", block)


def _notebook_links_on_the_site(markdown: str, src_uri: str) -> str:
    """A page links a notebook by its path in the repository, relative to the page's file (``../tutorials/01_….ipynb``
    from ``docs/getting-started.md``), so the link works where the Markdown is read as files (GitHub). On the site
    the notebook lies at that same path from the site's root: the link is rewritten relative to the page there."""
    here = posixpath.dirname(src_uri)

    def on_site(link: re.Match) -> str:
        repo_path = posixpath.normpath(posixpath.join("docs", here, link[1]))
        if repo_path.split("/")[0] not in NOTEBOOK_DIRS:
            return link[0]
        return f"]({posixpath.relpath(repo_path, here or '.')}{link[2] or ''})"

    return _NOTEBOOK_LINK.sub(on_site, markdown)


def _target(name: str, context: str, documented: set[str]) -> str | None:
    """The documented object that ``name`` refers to from the docstring of ``context``, or None."""
    if name.startswith("neuralode_tf"):
        return name if name in documented else None
    scope = context.split(".")
    while scope:
        if (candidate := ".".join([*scope, name])) in documented:
            return candidate
        scope.pop()
    return None


def _link_roles(html: str, documented: set[str]) -> str:
    contexts = [(m.start(), m[1]) for m in _OBJECT_ID.finditer(html)]

    def replace(match: re.Match[str]) -> str:
        title, tilde, name = match[1], match[2], match[3]
        title = title or (name.rsplit(".", 1)[-1] if tilde else name)
        context = next((ident for start, ident in reversed(contexts) if start < match.start()), "neuralode_tf")
        target = _target(name, context, documented)
        code = f"<code>{title}</code>"
        return f'<autoref identifier="{target}" optional>{code}</autoref>' if target else code

    return _ROLE.sub(replace, html)


@event_priority(50)  # before mkdocs-autorefs' on_env (-50), which turns <autoref> tags into links
def on_env(env, config, files: Files):
    pages = [file.page for file in files if file.page is not None and file.page.content]
    documented = {ident for page in pages for ident in _OBJECT_ID.findall(page.content)}
    for page in pages:
        page.content = _link_roles(page.content, documented)
    return env
