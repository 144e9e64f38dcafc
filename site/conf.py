"""Sphinx configuration of the executed edition (built by ``./course site``, see tools/course_site)."""
import logging

import jieba

jieba.setLogLevel(logging.INFO)  # its dictionary-loading messages are not the build's

project = "PyTorch 编译栈实战课程"
language = "zh_CN"  # Sphinx's Chinese search splits words with jieba (the `site` extra installs it)

extensions = ["myst_nb"]
# The notebooks arrive executed (course_site runs them, then removes exercise outputs): never run here.
nb_execution_mode = "off"
nb_merge_streams = True
# Widgets' embedding scripts come from a CDN; the course has no widgets, the pages load nothing remote.
nb_ipywidgets_js = {}
# A graph's output has text/html (a scroll box for JupyterLab, the SVG inlined as base64) and
# image/svg+xml: the pages take the SVG, written as an image file. myst-nb ranks text/html at 30.
nb_mime_priority_overrides = [(builder, "image/svg+xml", 25) for builder in ("html", "dirhtml", "singlehtml")]

exclude_patterns = ["**/.ipynb_checkpoints"]

html_theme = "sphinx_book_theme"
html_title = "PyTorch 编译栈实战课程 · 已运行版"
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,
}
