"""Stanford CS231n assignment 3 (the transformer part) as a pack: pack.py the declaration, reference.py the
team-written reference, mutants.py its described bugs."""
