#!/usr/bin/env python3
"""make export: write the commits on top of "pristine" in build/linux back
as patches, group by group, into the folders that `series` names.

`series` lists the groups in order.  Each group starts with a header line

    # group: <folder> (<tree>) <title>

followed by its patch files, all in <folder>.  A commit belongs to the
group whose entry has its subject (the file name without its number); a
commit with a new subject joins the group of the commit before it, so a
new patch goes where it is in the history.  A group's patches are numbered
from 0001 in their order; <folder>/0000-cover-letter.patch is generated
from <folder>/cover.txt (first line: the subject after "[PATCH <tree> 0/N]",
then the blurb) with git's shortlog and diffstat of the group.  Files of a
group's folder that no commit wrote any more are removed.  Every commit must
carry the project identity and its Signed-off-by.

Usage: scripts/export.py [--check]  (--check: write nothing, exit 1 when
the folders would change).
"""

import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(TOP, "build", "linux")
SERIES = os.path.join(TOP, "series")
IDENT = "netpoll-ng <netpoll-ng@example.org>"
HEADER = re.compile(r"^# group: (\S+) \(([^)]+)\) (.+)$")
FORMAT = ["format-patch", "-q", "--zero-commit", "--no-signature"]


class ExportError(Exception):
    pass


def git(*args, cwd=TREE):
    r = subprocess.run(["git", "-C", cwd] + list(args),
                       capture_output=True, text=True)
    if r.returncode:
        raise ExportError("git %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def parse_series(text):
    """(preamble lines, [group dict]) of a series file; a group is
    {folder, tree, title, header, entries}."""
    preamble, groups = [], []
    for n, line in enumerate(text.splitlines(), 1):
        m = HEADER.match(line)
        if m:
            groups.append({"folder": m.group(1), "tree": m.group(2),
                           "title": m.group(3), "header": line,
                           "entries": []})
        elif not line.strip() or line.startswith("#"):
            if not groups:
                preamble.append(line)
        elif not groups:
            raise ExportError("series:%d: %s is in no group (no '# group:' "
                              "line before it)" % (n, line))
        else:
            groups[-1]["entries"].append(line.strip())
    return preamble, groups


def slug(path):
    """A patch file's subject part: 0003-netpoll-foo.patch -> netpoll-foo."""
    return re.sub(r"^\d{4}-", "", os.path.basename(path))[:-len(".patch")]


def check_identity(commits):
    for c in commits:
        subj = git("log", "-1", "--format=%s", c).strip()
        if git("log", "-1", "--format=%an <%ae>", c).strip() != IDENT:
            raise ExportError("commit '%s': author is not %s" % (subj, IDENT))
        if "Signed-off-by: %s" % IDENT not in git("log", "-1", "--format=%B",
                                                  c).splitlines():
            raise ExportError("commit '%s': no 'Signed-off-by: %s'"
                              % (subj, IDENT))


def commit_slugs(commits, tmp):
    """format-patch's file name subject for each commit."""
    git(*FORMAT, "-o", tmp, "pristine..HEAD")
    names = sorted(f for f in os.listdir(tmp) if f.endswith(".patch"))
    if len(names) != len(commits):
        raise ExportError("format-patch wrote %d patches for %d commits"
                          % (len(names), len(commits)))
    for f in names:
        os.remove(os.path.join(tmp, f))
    return [slug(f) for f in names]


def assign_groups(slugs, groups):
    """The group index of each commit (see the module docstring)."""
    owner = {}
    for gi, g in enumerate(groups):
        for e in g["entries"]:
            owner.setdefault(slug(e), gi)
    out, cur = [], 0
    for s in slugs:
        gi = owner.get(s, cur)
        if gi < cur:
            raise ExportError("commit '%s' is in group %s but comes after a "
                              "commit of group %s: move it in build/linux, or "
                              "edit series" % (s, groups[gi]["folder"],
                                               groups[cur]["folder"]))
        out.append(gi)
        cur = gi
    return out


def write_patches(commits, gidx, groups, out):
    """Write each group's patches into out/<folder>/; returns the
    folder -> [file names] and the series entries."""
    written = {g["folder"]: [] for g in groups}
    for gi, g in enumerate(groups):
        mine = [c for c, i in zip(commits, gidx) if i == gi]
        d = os.path.join(out, g["folder"])
        os.makedirs(d, exist_ok=True)
        for k, c in enumerate(mine, 1):
            git(*FORMAT, "-N", "--start-number=%d" % k, "-o", d, "-1", c)
        names = sorted(f for f in os.listdir(d) if f.endswith(".patch"))
        written[g["folder"]] = names
        if mine:
            write_cover(g, mine, d)
    return written


def write_cover(g, mine, d):
    """<folder>/0000-cover-letter.patch from <folder>/cover.txt."""
    src = os.path.join(TOP, g["folder"], "cover.txt")
    if not os.path.exists(src):
        raise ExportError("%s: no cover.txt (first line: subject, then the "
                          "blurb)" % g["folder"])
    with open(src) as f:
        subject, _, blurb = f.read().partition("\n")
    tmp = tempfile.mkdtemp()
    try:
        git(*FORMAT, "--cover-letter", "--subject-prefix=PATCH %s" % g["tree"],
            "-o", tmp, "%s^..%s" % (mine[0], mine[-1]))
        with open(os.path.join(tmp, "0000-cover-letter.patch")) as f:
            text = f.read()
    finally:
        shutil.rmtree(tmp)
    date = git("log", "-1", "--format=%aD", mine[-1]).strip()
    text = re.sub(r"(?m)^Date: .*$", "Date: " + date, text, count=1)
    text = text.replace("*** SUBJECT HERE ***", subject.strip())
    text = text.replace("*** BLURB HERE ***", blurb.strip())
    with open(os.path.join(d, "0000-cover-letter.patch"), "w") as f:
        f.write(text)


def series_text(preamble, groups, written):
    lines = list(preamble)
    for g in groups:
        if lines and lines[-1].strip():
            lines.append("")
        lines.append(g["header"])
        lines += [os.path.join(g["folder"], f) for f in written[g["folder"]]
                  if not f.startswith("0000-")]
    return "\n".join(lines) + "\n"


def sync(out, groups, new_series, check):
    """Copy what changed into the repository; returns the changed paths."""
    changed = []
    for g in groups:
        d, src = os.path.join(TOP, g["folder"]), os.path.join(out, g["folder"])
        os.makedirs(d, exist_ok=True)
        new = set(os.listdir(src))
        for f in sorted(new):
            dest = os.path.join(d, f)
            if not (os.path.exists(dest) and
                    filecmp.cmp(os.path.join(src, f), dest, shallow=False)):
                changed.append(os.path.join(g["folder"], f))
                if not check:
                    shutil.copy(os.path.join(src, f), dest)
        for f in sorted(os.listdir(d)):
            if f.endswith(".patch") and f not in new:
                changed.append(os.path.join(g["folder"], f) + " (removed)")
                if not check:
                    os.remove(os.path.join(d, f))
    with open(SERIES) as f:
        if f.read() != new_series:
            changed.append("series")
            if not check:
                with open(SERIES, "w") as w:
                    w.write(new_series)
    return changed


def export(check=False):
    if not os.path.isdir(os.path.join(TREE, ".git")):
        raise ExportError("no build/linux (run 'make tree')")
    if git("status", "--porcelain", "--untracked-files=no").strip():
        raise ExportError("build/linux has uncommitted changes: commit them "
                          "first")
    if os.path.isdir(os.path.join(TREE, ".git", "rebase-apply")):
        raise ExportError("a git am is in progress in build/linux")
    with open(SERIES) as f:
        preamble, groups = parse_series(f.read())
    if not groups:
        raise ExportError("series has no '# group:' line")
    commits = git("rev-list", "--reverse", "pristine..HEAD").split()
    check_identity(commits)
    out = tempfile.mkdtemp()
    try:
        slugs = commit_slugs(commits, out)
        gidx = assign_groups(slugs, groups)
        written = write_patches(commits, gidx, groups, out)
        changed = sync(out, groups, series_text(preamble, groups, written),
                       check)
    finally:
        shutil.rmtree(out)
    for c in changed:
        print("export: %s %s" % ("would write" if check else "wrote", c))
    if not check:
        with open(os.path.join(TREE, ".git", "npng-applied"), "w") as f:
            f.write(git("rev-parse", "HEAD"))
        h = subprocess.run([os.path.join(TOP, "scripts", "series-hash.sh")],
                           capture_output=True, text=True, check=True).stdout
        with open(os.path.join(TREE, ".git", "npng-series-hash"), "w") as f:
            f.write(h)
    print("export: %d commit(s) in %d group(s), %d file(s) %s" % (
        len(commits), len(groups), len(changed),
        "would change" if check else "changed"))
    return changed


def main():
    ap = argparse.ArgumentParser(description="write build/linux's commits "
                                 "back into the series' group folders")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when something would change")
    args = ap.parse_args()
    try:
        changed = export(args.check)
    except ExportError as e:
        print("export: %s" % e, file=sys.stderr)
        return 2
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
