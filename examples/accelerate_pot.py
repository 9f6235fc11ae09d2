"""An unchanged POT domain-adaptation script, run plain and under numbaot.pot.

The function ``pot_color_adaptation`` below is POT's own colour-adaptation
recipe (POT's example "OT for image color adaptation", ``ot.da``): it only
calls POT.  The script runs it twice on real photographs, once as it is and
once inside ``with numbaot.pot.patched():``, and prints both times, how much
of the work numbaot took, and how well the two results agree.

Images (nothing is downloaded): scikit-image's ``astronaut.png`` (source)
and ``coffee.png`` (target), located in scikit-image's data directory and
read with matplotlib (any other pair: ``--source`` / ``--target``).

Run from the repository root::

    pip install ".[examples]"
    python examples/accelerate_pot.py
    python examples/accelerate_pot.py --n-samples 3000 --reg 0.05

Exit status 0 when the patched run agrees with POT's to solver tolerance
(max abs difference of the adapted colours below 1e-6), 1 otherwise.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402


def _skimage_image(name):
    import importlib.util
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("scikit-image is not installed: pip install '.[examples]' or give --source/--target")
    return os.path.join(list(spec.submodule_search_locations)[0], "data", name)


def _load(path):
    img = mpimg.imread(path)[..., :3].astype(np.float64)
    return img / 255.0 if img.max() > 1.0 else img


def pot_color_adaptation(I1, I2, n_samples, reg, seed):
    """POT's colour-adaptation example, unchanged: only POT is called here."""
    import ot

    X1, X2 = I1.reshape(-1, 3), I2.reshape(-1, 3)
    rng = np.random.RandomState(seed)
    Xs = X1[rng.randint(X1.shape[0], size=(n_samples,)), :]
    Xt = X2[rng.randint(X2.shape[0], size=(n_samples,)), :]
    adapt = ot.da.SinkhornTransport(reg_e=reg)
    adapt.fit(Xs=Xs, Xt=Xt)
    return adapt.transform(Xs=Xs), adapt.coupling_


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", default=None, help="source image (default: skimage astronaut)")
    p.add_argument("--target", default=None, help="target image (default: skimage coffee)")
    p.add_argument("--n-samples", type=int, default=2000)
    p.add_argument("--reg", type=float, default=0.1, help="reg_e of SinkhornTransport")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)

    import numbaot.pot

    I1 = _load(args.source or _skimage_image("astronaut.png"))
    I2 = _load(args.target or _skimage_image("coffee.png"))
    run = lambda: pot_color_adaptation(I1, I2, args.n_samples, args.reg, args.seed)  # noqa: E731

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        ref, G_ref = run()
        t_pot = time.perf_counter() - t0
        with numbaot.pot.patched() as replaced:
            run()                       # first patched run: compiles (or loads) the kernels
            numbaot.pot.stats(reset=True)
            t0 = time.perf_counter()
            out, G = run()
            t_nb = time.perf_counter() - t0
            counts = numbaot.pot.stats()

    diff = float(np.max(np.abs(out - ref)))
    print(f"{args.n_samples} sampled pixels per image, reg_e = {args.reg}")
    print(f"POT bindings replaced: {len(replaced)}; calls run by numbaot: "
          + ", ".join(f"{k} x{v['numbaot']}" for k, v in counts.items() if v["numbaot"]))
    print(f"POT alone          : {t_pot:8.3f} s")
    print(f"POT + numbaot.pot  : {t_nb:8.3f} s   ({t_pot / t_nb:.1f}x)")
    print(f"max |difference| of the adapted colours: {diff:.2e}; of the couplings: "
          f"{float(np.max(np.abs(G - G_ref))):.2e}")
    return 0 if diff < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
