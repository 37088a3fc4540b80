"""Sphinx extension: the Chinese book's furniture in Simplified Chinese (mainland usage).

What a page shows around its text comes from the themes, not from the pages' catalogues:
the site title (`html_title`), the header buttons' tooltips and labels (sphinx-book-theme's
own catalogue, whose zh_CN file writes "Print to PDF" the Taiwan way, 列印成 PDF, and lacks
"Launch on", "Search", "Repository" and others), and the label above an exported cell
(book/_ext/nbdev_directives.py). On the zh_CN build this extension gives:

- the site title in Chinese (`TITLE`);
- sphinx-book-theme's messages from locales/theme/zh_CN/LC_MESSAGES/booktheme.po first (the
  theme's catalogue stays behind it for anything that file lacks), compiled at build time;
- the Colab button's tooltip as one phrase: the theme builds it as "Launch on" + " Colab",
  which no word order of Chinese fits;
- the search box's placeholder and the fold buttons' hints in Chinese (configuration);
- the tooltips and labels the themes' templates write in English whatever the language
  (pydata-sphinx-theme's colour switch, sphinx-book-theme's sidebar toggles, Sphinx's
  heading links): each page's HTML, once written, gets them from `ATTRIBUTES`.

The English build is untouched. The language switch that keeps the reader's section is in
book/_static/language_switch.js (language_switch.py adds it to every page).
"""
from __future__ import annotations

import re
from pathlib import Path

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from sphinx import locale

ZH = "zh_CN"
TITLE = "transformer-lit：亲手搭建、逐一检验的 Transformer"
THEME_CATALOGUE = "booktheme"      # sphinx-book-theme's MESSAGE_CATALOG_NAME
OURS = Path("locales", "theme")    # beside the pages' catalogues (locales/zh_CN/...)
LAUNCH = {"Colab": "在 Colab 中打开"}
AUTHOR = "transformer-lit 的作者们"
SEARCH_PLACEHOLDER = "搜索本书…"
TOGGLE_HINTS = {"togglebutton_hint": "点击显示", "togglebutton_hint_hide": "点击隐藏"}
# attribute values the templates write in English, as title="…", aria-label="…" and
# data-bs-title="…" (the words a tooltip or a screen reader says)
ATTRIBUTES = {
    "Toggle primary sidebar": "显示或隐藏左侧栏",
    "Toggle secondary sidebar": "显示或隐藏右侧栏",
    "Color mode": "颜色模式", "System Settings": "跟随系统", "Light": "浅色", "Dark": "深色",
    "Link to this heading": "链接到本节", "Link to this code": "链接到本段代码",
    "Link to this image": "链接到本图", "Link to this table": "链接到本表",
    "Main": "主导航", "Page": "本页", "Site navigation": "站点导航",
    "Section navigation": "本章导航", "Breadcrumb": "路径",
    "Search": "搜索", "Copy to clipboard": "复制到剪贴板",
    "Toggle hidden content": "显示或隐藏内容",
}


def chinese_title(app, config) -> None:
    "The site title, the search box's placeholder and the fold buttons' hints."
    if config.language != ZH:
        return
    config.html_title = TITLE
    config.author = AUTHOR
    config.html_theme_options = {**config.html_theme_options,
                                 "search_bar_text": SEARCH_PLACEHOLDER}
    for name, value in TOGGLE_HINTS.items():
        setattr(config, name, value)


_ATTRIBUTE = re.compile(r'\b(title|aria-label|data-bs-title)="([^"]*)"')


# the footer's line, which pydata-sphinx-theme writes from its own catalogue (it has "zh",
# not "zh_CN", so the Chinese build never finds it)
_COPYRIGHT = re.compile(r"© Copyright ([^<.]+)\.")


def translate_attributes(html: str) -> str:
    "The English tooltips and labels of ATTRIBUTES, and the copyright line, in Chinese."
    html = _ATTRIBUTE.sub(lambda m: f'{m[1]}="{ATTRIBUTES.get(m[2], m[2])}"', html)
    return _COPYRIGHT.sub(r"© \1 版权所有", html)


def chinese_attributes(app, exception) -> None:
    "Once the pages are written: their templates' English tooltips and labels, translated."
    if exception is not None or app.config.language != ZH or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        done = translate_attributes(text)
        if done != text:
            page.write_text(done, encoding="utf-8")


def theme_messages(app) -> None:
    """Put our catalogue of the theme's messages in front of the theme's own zh_CN one.
    Sphinx keeps one translator per (namespace, catalogue); the theme's setup made it from
    the theme's folder alone, so it is made again from both folders, ours first."""
    if app.config.language != ZH:
        return
    po = Path(app.srcdir, OURS, ZH, "LC_MESSAGES", f"{THEME_CATALOGUE}.po")
    folder = Path(app.doctreedir).parent / ".theme-locale"
    mo = folder / ZH / "LC_MESSAGES" / f"{THEME_CATALOGUE}.mo"
    mo.parent.mkdir(parents=True, exist_ok=True)
    with po.open("rb") as f:
        catalog = read_po(f, locale=ZH)
    with mo.open("wb") as f:
        write_mo(f, catalog)
    import sphinx_book_theme
    theirs = Path(sphinx_book_theme.get_html_theme_path(), "static", "locales")
    locale.translators.pop(("general", THEME_CATALOGUE), None)
    locale.init([str(folder), str(theirs)], ZH, THEME_CATALOGUE)


def _buttons(items):
    for item in items or []:
        if isinstance(item, dict):
            yield item
            yield from _buttons(item.get("buttons"))


def launch_tooltips(app, pagename, templatename, context, doctree) -> None:
    "The launch buttons' tooltips as one Chinese phrase each."
    if app.config.language != ZH:
        return
    launch_on = locale.get_translation(THEME_CATALOGUE)("Launch on")
    for button in _buttons(context.get("header_buttons")):
        for service, phrase in LAUNCH.items():
            if button.get("tooltip") in (f"{launch_on} {service}", f"Launch on {service}"):
                button["tooltip"] = phrase


def setup(app):
    app.connect("config-inited", chinese_title)
    app.connect("builder-inited", theme_messages)
    # after sphinx-book-theme's own handlers (priority 500) have added the buttons
    app.connect("html-page-context", launch_tooltips, priority=900)
    app.connect("build-finished", chinese_attributes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
