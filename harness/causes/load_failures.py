"""Causes for a submission that cannot be loaded or run at all."""
from ..assignments import FOLDER_PACKS, SINGLE_FILE
from .base import Cause, Observed

SYNTAX = Cause("syntax-error", "The file does not parse", "Python cannot parse the file.",
               "Nothing in the file can run until it parses.", "A SyntaxError at the line shown.",
               "Fix the syntax at the line shown (run `python -m py_compile yourfile.py`).")
DEFINITION = Cause("definition-error", "An error while the file's definitions run",
                   "Importing the file (its imports, classes, functions and constants) raises an exception.",
                   "The harness cannot get your classes if defining them fails.",
                   "An exception at the line shown, before any probe runs.",
                   "Fix the line shown; make sure the file imports on its own (`python -c 'import yourfile'`).")
MISSING_MODULE = Cause("missing-module", "The file imports a module that is not installed",
                       "An import at the top of the file names a module that is not available.",
                       "The grader runs with torch, numpy, matplotlib and the standard library only.",
                       "ModuleNotFoundError at the import line.",
                       "Remove the import or use only torch, numpy, matplotlib and the standard library.")
MISSING_NAME = Cause("missing-name", "Required names are not defined",
                     "The contract's required class is not defined at the top level of the file.",
                     "The harness finds your model by its lesson name.",
                     "No MiniTransformer (reversal) or TransformerBlock (block) at the top level.",
                     "Define the class with the lesson's name and signature at the top level (not inside a "
                     "function or an if __name__ block).")
UNREADABLE = Cause("unreadable-file", "The file cannot be read", "The file is not UTF-8 text or not a valid "
                   "notebook.", "The harness cannot see your code.", "", "Save the file as UTF-8 .py or .ipynb.")
EXIT = Cause("exit-during-load", "The file exits while loading", "sys.exit() or exit() at the top level.",
             "The grader cannot continue once the program ends.", "", "Remove the exit call.")
TIMEOUT = Cause("timeout", "Ran past the time limit", "The code did not finish within the time limit.",
                "An infinite loop or a very slow forward pass stops the whole check.",
                "The check is stopped; the line where it was running is shown.",
                "Look for a loop that never ends or work repeated far too often at the line shown.")
MEMORY = Cause("memory-limit", "Exceeded the memory limit", "The process used more memory than allowed.",
               "", "The process was killed by the memory limit.", "Check tensor sizes: something allocates far "
               "more than a 236k-parameter model needs.")
CRASHED = Cause("crashed", "The process died", "The child process ended without a result (os._exit, a signal, "
                "sys.exit during a probe).", "", "", "Do not call exit functions or kill the process from your "
                                                     "code.")
FORWARD = Cause("forward-error", "An exception inside your code during a check",
                "Your code raised an exception when the harness called it with valid inputs.", "",
                "The exception and the line are shown.", "Run the lesson's shape check (one forward pass with "
                                                         "batch 2) and fix the line shown.")
GRADER = Cause("grader-fault", "The grader itself failed", "An internal error of mtxdiag, not of your code.",
               "", "", "Report it to your instructor; your code may be fine.")
TAMPER = Cause("tampering", "The submission changes torch or the harness",
               "The code replaces functions of torch, builtins or the harness that the checks rely on.",
               "Checks could be fooled; tampering is itself a finding.", "", "Do not monkeypatch torch, builtins "
                                                                              "or the grader.",
               mechanism="the guard's record of torch, builtins or harness functions the submission replaced",
               observed=tuple(Observed(cid, "status", ("fail",)) for cid in ("result-channel", "tamper",
                                                                               "tamper-static", "isolation")),
               assignments=SINGLE_FILE + FOLDER_PACKS)       # integrity: a folder pack's assignment too
UNEXPLAINED = Cause("unexplained-failure", "A check failed without a known cause",
                    "A measurement is outside the range correct implementations give, and no catalogued cause "
                    "matches.", "", "", "Read the failing check's measured and expected values below.")

DEVIATION = Cause("contract-deviation", "A component's interface differs from the lesson's contract",
                  "A component (a layer, the attention, the positional encoding) cannot be called the way the "
                  "contract describes (another tensor layout, return type or mask convention), while the whole "
                  "model works.", "Only the checks that call that component directly are skipped; the model's "
                  "behaviour is still checked end to end. Not a bug.", "The component raised when called with "
                  "the contract's shapes; the model's own forward pass runs.",
                  "Nothing to fix for correctness; match the contract's signature if your course requires it.",
                  severity="info")

SCRIPT = Cause("script-fails", "The file fails when run as a script",
               "Top-level code the checks do not run (a module-level raise, a file it opens that is not there) "
               "stops `python yourfile.py` before it finishes.",
               "The checks load definitions only, so they pass; whoever runs your file meets the error first.",
               "The line and what fails there.", "Remove the raise or guard it; ship the data file with the "
                                                 "submission or build the data in code.", severity="info",
               mechanism="the skipped statement parsed: an unconditional raise, or a literal path read that does "
                         "not exist beside the submission")

CAUSES = (SYNTAX, DEFINITION, MISSING_MODULE, MISSING_NAME, UNREADABLE, EXIT, TIMEOUT, MEMORY, CRASHED, FORWARD,
          GRADER, TAMPER, UNEXPLAINED, DEVIATION, SCRIPT)
