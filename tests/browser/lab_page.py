"""The few JupyterLab interactions a learner's first hour needs, through Playwright."""
from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

from playwright.sync_api import Page, expect


class LabPage:
    """JupyterLab as the learner sees it: menus, tabs, the file browser, cells and prompts."""

    def __init__(self, page: Page, link: str):
        self.page = page
        parts = urlsplit(link)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = dict(q.split("=", 1) for q in parts.query.split("&"))["token"]

    @property
    def notebook(self):
        """The notebook panel in front."""
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")

    def current_tab(self):
        return self.page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")

    def current_tab_label(self) -> str:
        return self.current_tab().locator(".lm-TabBar-tabLabel").inner_text()

    def menu_bar_labels(self) -> list[str]:
        return self.page.locator("#jp-menu-panel .lm-MenuBar-itemLabel").all_inner_texts()

    def open_from_file_browser(self, name: str) -> None:
        self.page.locator(".jp-DirListing-item", has_text=name).first.dblclick()
        expect(self.page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")).to_contain_text(name)

    def wait_for_idle_kernel(self, timeout_s: float = 120) -> None:
        """Idle *after* the kernel started: the server's session list, then the toolbar."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            sessions = self.page.request.get(f"{self.base}/api/sessions?token={self.token}").json()
            path = self.current_tab_label()
            if any(s["path"].endswith(path) and s["kernel"]["execution_state"] == "idle" for s in sessions):
                break
            time.sleep(0.5)
        else:
            raise TimeoutError("the kernel did not become idle")
        expect(self.notebook.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
            "data-status", "idle", timeout=timeout_s * 1000)

    def run_menu(self, item: str) -> None:
        self.page.locator("#jp-menu-panel .lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        self.page.locator(".lm-Menu-item", has_text=item).first.click()

    def code_cells(self):
        return self.notebook.locator(".jp-CodeCell")

    def code_cell_containing(self, text: str):
        return self.code_cells().filter(has_text=text).first

    def prompt(self, cell) -> str:
        return cell.locator(".jp-InputPrompt").inner_text().strip()

    def wait_until_run_finished(self, timeout_s: float) -> None:
        """Run All marks the cells it queued ``[*]``; done when none is left, whether the last
        cell ran or an error cleared the queue."""
        queued = self.notebook.locator(".jp-InputPrompt", has_text="[*]")
        expect(self.code_cells().last.locator(".jp-InputPrompt")).not_to_have_text("[ ]:")
        expect(queued).to_have_count(0, timeout=timeout_s * 1000)

    def replace_source(self, cell, source: str) -> None:
        """Select the cell's text and type the new source in one input (no auto-indent)."""
        cell.locator(".cm-content").click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.insert_text(source)
        self.page.keyboard.press("Escape")

    def run_cell(self, cell) -> None:
        cell.locator(".jp-InputArea-prompt").click()
        self.page.keyboard.press("Control+Enter")

    def expect_text(self, locator, text: str, timeout_s: float = 60) -> None:
        expect(locator).to_contain_text(text, timeout=timeout_s * 1000)

    def save(self) -> None:
        self.page.keyboard.press("Control+S")
        expect(self.page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")).not_to_have_class(
            re.compile(r"jp-mod-dirty"))
