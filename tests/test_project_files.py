"""The set-up files agree with each other: one package list, one place for pins, the two commands."""

import re
import tomllib

import yaml

CONDA_TO_PIP = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch"}
NOT_PACKAGES = {"python", "pip"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower()


def _pyproject_packages(root, extras=None) -> set[str]:
    """The names pyproject.toml installs with `extras` (all of them when None)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        if extras is None or extra in extras:
            names |= {_name(r) for r in requirements}
    return names


def _conda_packages(path) -> set[str]:
    env = yaml.safe_load(path.read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name = _name(dep)
            names.add(CONDA_TO_PIP.get(name, name))
        else:  # the pip subsection: packages taken from PyPI, and labkit itself ("-e .")
            names |= {_name(r) for r in dep["pip"] if not r.startswith("-")}
    return names - NOT_PACKAGES


def test_conda_and_binder_environments_list_the_same_packages_as_pyproject(root):
    assert _conda_packages(root / "environment.yml") == _pyproject_packages(root)
    # Binder is a learner's session: the lab extra, as `make lab` installs, without the test and book tool chains.
    assert _conda_packages(root / "binder" / "environment.yml") == _pyproject_packages(root, extras={"lab"})


def test_gpu_and_binder_environments_use_the_right_pytorch_builds(root):
    assert "pytorch-gpu" in (root / "environment.yml").read_text()
    binder = yaml.safe_load((root / "binder" / "environment.yml").read_text())
    assert "pytorch-cpu" in binder["dependencies"] and binder["channels"] == ["conda-forge"]


def test_constraints_pin_every_package_exactly_once(root):
    pins = {}
    for line in (root / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin"
            assert name.lower() not in pins, f"{name} pinned twice"
            pins[name.lower()] = version
    assert set(pins) == _pyproject_packages(root)


def test_binder_postbuild_installs_labkit_and_stops_on_error(root):
    post = (root / "binder" / "postBuild").read_text()
    assert post.startswith("#!") and "set -e" in post and "pip install" in post and "-e ." in post


def test_readme_ci_and_makefile_share_the_commands(root):
    readme = (root / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme and "make report" in readme
    ci = (root / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.MULTILINE)
    makefile = (root / "Makefile").read_text()
    for target in ("lab:", "test:", "report:", "doctor:"):
        assert target in makefile
    assert "constraints.txt" in makefile and "python -m labkit lab" in makefile  # the command: labkit/lab/commands.py


def test_contributing_names_only_make_targets_and_files_that_exist(root):
    text = (root / "CONTRIBUTING.md").read_text()
    targets = set(re.findall(r"^([a-z.][\w./-]*):", (root / "Makefile").read_text(), re.M))
    named = set(re.findall(r"`make ([a-z][a-z-]*)", text))
    assert named and named <= targets, f"CONTRIBUTING.md names make targets the Makefile lacks: {named - targets}"
    paths = set(re.findall(r"`((?:labkit|tests|tools|notebooks|docs)/[\w/.-]+\.(?:py|md|json))`", text))
    assert paths and not [p for p in paths if not (root / p).exists()], "CONTRIBUTING.md names files that do not exist"


def test_the_pre_commit_hooks_run_commands_that_exist(root):
    config = yaml.safe_load((root / ".pre-commit-config.yaml").read_text())
    hooks = [h for repo in config["repos"] for h in repo["hooks"]]
    assert {h["id"] for h in hooks} >= {"ruff-check", "ruff-format", "structure-and-floors", "commit-message"}
    for hook in hooks:
        for word in hook["entry"].split():
            if word.startswith(("tests/", "tools/")):
                assert (root / word).exists(), f"pre-commit hook {hook['id']} names {word}, which does not exist"


def test_the_commit_message_check_holds_subjects_to_72_characters():
    import check_commit_msg

    assert check_commit_msg.problems("serving_llms: print the scheduler loop itself\n\nThe body.\n") == []
    assert check_commit_msg.problems("tools: x\n# a git comment line\n") == []
    assert check_commit_msg.problems("sharding, checkpoints: one idea per cell\n") == []
    assert check_commit_msg.problems("fix: the thing, again\n") == []
    long = "serving_llms: " + "a" * 70
    assert any("at most 72" in p for p in check_commit_msg.problems(long))
    assert any("what it changes" in p for p in check_commit_msg.problems("Fixed some things in the notebook"))
    assert any("what it changes" in p for p in check_commit_msg.problems("Fixed the notebook: it works now"))
    assert any("blank line" in p for p in check_commit_msg.problems("lab: a\nbody right away"))
    assert check_commit_msg.problems("# only comments\n") == ["the message is empty: a subject line is needed"]
