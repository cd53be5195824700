# hostile: reads another student's file, the rubric and the repository, lists folders, writes into the
# output folder and another student's folder, deletes another student's file
# flake8: noqa  (a fragment: test_hostile.py appends it to its base)
# base: contract-missing
import os


class _Probe:
    for _t in ["{{SECRET}}", "{{RUBRIC}}", "{{REPO}}/pyproject.toml", "{{REPO}}/harness/engine.py",
               "{{OUT}}/sentinel.txt", "/etc/shadow", "/etc/passwd"]:
        try:
            with open(_t) as _f:
                print("READ-OK", _t, _f.read(200).replace("\n", " "))
        except Exception as _e:
            print("READ-REFUSED", _t, type(_e).__name__)
    for _d in ["{{OTHER}}", "{{OUT}}", "{{REPO}}", "/home", "/work"]:
        try:
            print("LIST-OK", _d, sorted(os.listdir(_d))[:20])
        except Exception as _e:
            print("LIST-REFUSED", _d, type(_e).__name__)
    print("TMP", sorted(os.listdir("/tmp")))
    for _t in ["{{OUT}}/forged.json", "{{OTHER}}/evil.py", "{{REPO}}/harness/evil.py"]:
        try:
            with open(_t, "w") as _f:
                _f.write('{"verdict": "clean"}')
            print("WRITE-OK", _t)
        except Exception as _e:
            print("WRITE-REFUSED", _t, type(_e).__name__)
    for _t in ["{{SECRET}}", "{{OUT}}/sentinel.txt"]:
        try:
            os.remove(_t)
            print("DELETE-OK", _t)
        except Exception as _e:
            print("DELETE-REFUSED", _t, type(_e).__name__)
