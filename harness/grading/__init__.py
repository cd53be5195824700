"""Grading a class: discovery of the submissions, the workers and progress, results, the gradebook, rubrics and
Gradescope (results and the autograder zip). Torch-free, on the trusted parent's side."""
