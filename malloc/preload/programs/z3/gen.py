#!/usr/bin/env python3
"""Writes the SMT-LIB problems of this folder (run from it: python3 gen.py).

Each has one answer whatever path the solver takes, so z3's output is the same
under any allocator: a factorisation with one solution (bit-vectors), a pigeonhole
formula (unsat), a sudoku with one solution (integers), and job-shop schedules whose
optimal makespan is printed (integer optimisation; the schedule itself is not).
"""


def lcg(seed):
    s = seed
    while True:
        s = (s * 1103515245 + 12345) % 2147483648
        yield s


def factor(path, p, q, width, half):
    n = p * q
    lines = [f"; factor {n} = {p} * {q} (both prime) in {width}-bit arithmetic",
             "(set-option :random-seed 1)", "(set-logic QF_BV)",
             f"(declare-const x (_ BitVec {width}))", f"(declare-const y (_ BitVec {width}))",
             f"(assert (bvult x (_ bv{half} {width})))", f"(assert (bvult y (_ bv{half} {width})))",
             f"(assert (bvugt x (_ bv1 {width})))", "(assert (bvule x y))",
             f"(assert (= (bvmul x y) (_ bv{n} {width})))", "(check-sat)", "(get-value (x y))"]
    write(path, lines)


def pigeonhole(path, n):
    lines = [f"; {n + 1} pigeons in {n} holes: unsat", "(set-option :random-seed 1)", "(set-logic QF_UF)"]
    for i in range(n + 1):
        for j in range(n):
            lines.append(f"(declare-const p{i}_{j} Bool)")
    for i in range(n + 1):
        lines.append("(assert (or " + " ".join(f"p{i}_{j}" for j in range(n)) + "))")
    for j in range(n):
        for i in range(n + 1):
            for k in range(i + 1, n + 1):
                lines.append(f"(assert (not (and p{i}_{j} p{k}_{j})))")
    lines.append("(check-sat)")
    write(path, lines)


def sudoku(path):
    g = ["1....7.9.", ".3..2...8", "..96..5..", "..53..9..", ".1..8...2",
         "6....4...", "3......1.", ".4......7", "..7...3.."]
    lines = ['; sudoku ("AI Escargot", one solution) in integer arithmetic',
             "(set-option :random-seed 1)", "(set-logic QF_LIA)"]
    for r in range(9):
        for c in range(9):
            lines.append(f"(declare-const c{r}{c} Int)")
            lines.append(f"(assert (and (>= c{r}{c} 1) (<= c{r}{c} 9)))")
            if g[r][c] != ".":
                lines.append(f"(assert (= c{r}{c} {g[r][c]}))")
    for r in range(9):
        lines.append("(assert (distinct " + " ".join(f"c{r}{c}" for c in range(9)) + "))")
    for c in range(9):
        lines.append("(assert (distinct " + " ".join(f"c{r}{c}" for r in range(9)) + "))")
    for br in range(3):
        for bc in range(3):
            cells = " ".join(f"c{3 * br + i}{3 * bc + j}" for i in range(3) for j in range(3))
            lines.append(f"(assert (distinct {cells}))")
    lines.append("(check-sat)")
    for r in range(9):
        lines.append("(get-value (" + " ".join(f"c{r}{c}" for c in range(9)) + "))")
    write(path, lines)


def jobshop(path, jobs, machines, seed):
    rnd = lcg(seed)
    ops = []
    for _ in range(jobs):
        order = list(range(machines))
        for i in range(machines - 1, 0, -1):
            k = next(rnd) % (i + 1)
            order[i], order[k] = order[k], order[i]
        ops.append([(m, 1 + next(rnd) % 9) for m in order])
    lines = [f"; job-shop {jobs} jobs x {machines} machines (LCG seed {seed}): minimise the makespan",
             "(set-option :random-seed 1)"]
    for j in range(jobs):
        for k in range(machines):
            lines.append(f"(declare-const s{j}_{k} Int)")
    lines.append("(declare-const makespan Int)")
    for j in range(jobs):
        lines.append(f"(assert (>= s{j}_0 0))")
        for k in range(machines - 1):
            lines.append(f"(assert (>= s{j}_{k + 1} (+ s{j}_{k} {ops[j][k][1]})))")
        lines.append(f"(assert (>= makespan (+ s{j}_{machines - 1} {ops[j][machines - 1][1]})))")
    for m in range(machines):
        on = [(j, k, d) for j in range(jobs) for k, (mm, d) in enumerate(ops[j]) if mm == m]
        for a in range(len(on)):
            for b in range(a + 1, len(on)):
                j1, k1, d1 = on[a]
                j2, k2, d2 = on[b]
                lines.append(f"(assert (or (>= s{j2}_{k2} (+ s{j1}_{k1} {d1})) "
                             f"(>= s{j1}_{k1} (+ s{j2}_{k2} {d2}))))")
    lines += ["(minimize makespan)", "(check-sat)", "(get-objectives)"]
    write(path, lines)


def write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


factor("factor.smt2", 32749, 65521, 32, 65536)
pigeonhole("pigeonhole8.smt2", 8)
sudoku("sudoku.smt2")
jobshop("jobshop-10x5.smt2", 10, 5, 3)
