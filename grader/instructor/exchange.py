"""nbgrader's exchange on a multi-user machine: a submission filed under another student's
name is never collected.

Every account may write into the exchange's ``inbound/``, and ``nbgrader submit
--student=OTHER`` (or a hand-made folder) files a submission under another student's name;
nbgrader's own collect only warns about the owner and takes it when it is the newest,
replacing that student's work. Here it is logged as an error and left in ``inbound/``.
This needs one Unix account per student (a JupyterHub on one machine, not containers that
all run as ``jovyan``).
"""
from __future__ import annotations

import os
import pwd

from nbgrader.exchange.default.collect import ExchangeCollect


def owner_name(path: str) -> str:
    try:
        return pwd.getpwuid(os.stat(path).st_uid).pw_name
    except KeyError:
        return "unknown account"


class OwnerCheckedCollect(ExchangeCollect):
    """``nbgrader collect`` that only takes submissions made by the student they name."""

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        owner = owner_name(path)
        if owner != record["username"]:
            self.log.error("Not collected: %s names student %s but was submitted by %s",
                           path, record["username"], owner)
            record["username"] = None  # grouped apart from the named student's own submissions
        return record

    def init_src(self):
        super().init_src()
        self.src_records = [record for record in self.src_records if record["username"] is not None]
