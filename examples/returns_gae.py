"""Discounted returns and GAE on CartPole rollouts, with a plot.

Runs 64 CartPole environments in lockstep for 1000 steps each with a
hand-written controller that takes a random action half of the time; an
episode ends when the pole falls (|theta| > 12 degrees) or the cart leaves
the track (|x| > 2.4), and the environment is reset (the classic-control dynamics of Barto, Sutton & Anderson 1983, as in
Gymnasium's CartPole-v1, written in NumPy so that nothing but numbaot, NumPy
and matplotlib is needed).  Then:

1. Monte-Carlo discounted returns G_t = r_t + gamma (1 - d_t) G_{t+1} of the
   whole (64, 1000) batch with one ``numbaot.discounted_cumsum_right`` call
   (the ``dones`` mask stops the sums at episode ends);
2. a critic V(s): least squares of the returns on quadratic features of the
   state (the returns of the last, unfinished episode of each environment are
   left out: they are truncated);
3. generalized advantage estimation with ``numbaot.gae`` for several lambdas,
   bootstrapping every unfinished rollout with V of its next state.

Everything is checked against plain Python loops and scipy.signal.lfilter,
and the figure ``returns_gae.png`` shows one environment's episodes, returns,
fitted values and advantages.

    python examples/returns_gae.py
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numbaot  # noqa: E402

GAMMA = 0.99

# CartPole-v1 constants
G, M_CART, M_POLE, HALF_LEN, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL = M_CART + M_POLE
POLE_ML = M_POLE * HALF_LEN
THETA_MAX, X_MAX = 12 * 2 * np.pi / 360, 2.4


def step(s, action):
    """One Euler step of every environment; s (n_envs, 4) = (x, x', th, th')."""
    x, x_dot, th, th_dot = s.T
    force = np.where(action == 1, FORCE, -FORCE)
    cos, sin = np.cos(th), np.sin(th)
    temp = (force + POLE_ML * th_dot ** 2 * sin) / TOTAL
    th_acc = (G * sin - cos * temp) / (HALF_LEN * (4.0 / 3.0 - M_POLE * cos ** 2 / TOTAL))
    x_acc = temp - POLE_ML * th_acc * cos / TOTAL
    new = np.stack([x + TAU * x_dot, x_dot + TAU * x_acc, th + TAU * th_dot, th_dot + TAU * th_acc], 1)
    done = (np.abs(new[:, 0]) > X_MAX) | (np.abs(new[:, 2]) > THETA_MAX)
    return new, done


def rollout(n_envs=64, n_steps=1000, eps=0.5, seed=0):
    """States (n_envs, n_steps + 1, 4), rewards and dones (n_envs, n_steps)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(-0.05, 0.05, size=(n_envs, 4))
    states = np.empty((n_envs, n_steps + 1, 4))
    rewards = np.ones((n_envs, n_steps))
    dones = np.zeros((n_envs, n_steps), dtype=bool)
    for t in range(n_steps):
        states[:, t] = s
        greedy = (s[:, 2] + 0.3 * s[:, 3] + 0.02 * s[:, 1] + 0.01 * s[:, 0] > 0).astype(int)
        action = np.where(rng.random(n_envs) < eps, rng.integers(0, 2, n_envs), greedy)
        s, done = step(s, action)
        dones[:, t] = done
        # reset the finished environments (the state after a done is a new start)
        s[done] = rng.uniform(-0.05, 0.05, size=(int(done.sum()), 4))
    states[:, n_steps] = s
    return states, rewards, dones


def features(s):
    """Quadratic features of the state (..., 4) -> (..., 15)."""
    iu = np.triu_indices(4)
    quad = (s[..., :, None] * s[..., None, :])[..., iu[0], iu[1]]
    return np.concatenate([np.ones(s.shape[:-1] + (1,)), s, quad], axis=-1)


def loop_returns(r, d, g):
    out = np.zeros_like(r)
    for i in range(r.shape[0]):
        acc = 0.0
        for t in range(r.shape[1] - 1, -1, -1):
            acc = r[i, t] + g * (0.0 if d[i, t] else 1.0) * acc
            out[i, t] = acc
    return out


def loop_gae(r, v, d, g, lam):
    adv = np.zeros_like(r)
    for i in range(r.shape[0]):
        a = 0.0
        for t in range(r.shape[1] - 1, -1, -1):
            nt = 0.0 if d[i, t] else 1.0
            a = r[i, t] + g * nt * v[i, t + 1] - v[i, t] + g * lam * nt * a
            adv[i, t] = a
    return adv


def main():
    states, rewards, dones = rollout()
    n_envs, n_steps = rewards.shape
    lengths = np.concatenate([np.diff(np.flatnonzero(np.r_[True, d])) for d in dones])
    print(f"{n_envs} CartPole environments x {n_steps} steps: {int(dones.sum())} episodes ended, "
          f"median length of the completed episodes {int(np.median(lengths))} steps")

    # 1. Monte-Carlo returns, checked against a loop and (per episode) lfilter
    numbaot.discounted_cumsum_right(rewards, GAMMA, dones)  # compile / load from cache
    t0 = time.perf_counter()
    G_mc = numbaot.discounted_cumsum_right(rewards, GAMMA, dones)
    t_nb = time.perf_counter() - t0
    t0 = time.perf_counter()
    G_loop = loop_returns(rewards, dones, GAMMA)
    t_loop = time.perf_counter() - t0
    err = np.max(np.abs(G_mc - G_loop))
    print(f"returns: numbaot {t_nb * 1e3:.2f} ms, Python loop {t_loop * 1e3:.0f} ms, max |diff| {err:.1e}")
    assert err < 1e-10

    # 2. critic: least squares on the completed episodes' returns
    last_done = np.array([np.flatnonzero(d)[-1] if d.any() else -1 for d in dones])
    complete = np.arange(n_steps)[None, :] <= last_done[:, None]
    Phi = features(states[:, :n_steps])
    w, *_ = np.linalg.lstsq(Phi[complete], G_mc[complete], rcond=None)
    V = features(states) @ w  # (n_envs, n_steps + 1): V(s_N) bootstraps the rollout end
    resid = G_mc[complete] - V[:, :n_steps][complete]
    print(f"critic: R^2 = {1 - resid.var() / G_mc[complete].var():.3f} on {int(complete.sum())} states")

    # 3. GAE for several lambdas
    advs = {}
    for lam in (0.0, 0.9, 0.95, 1.0):
        adv, ret = numbaot.gae(rewards, V, dones, GAMMA, lam)
        ref = loop_gae(rewards, V, dones, GAMMA, lam)
        assert np.max(np.abs(adv - ref)) < 1e-9 and np.allclose(ret, adv + V[:, :n_steps])
        advs[lam] = adv
        print(f"GAE lambda={lam:4}: mean |A| = {np.mean(np.abs(adv)):.3f}, "
              f"std {adv.std():.3f}; matches the loop")

    # gradient of sum(G) w.r.t. the rewards and gamma, as a check of the backward
    gi, gg = numbaot.discounted_cumsum_right_backward(np.ones_like(G_mc), G_mc, GAMMA, dones)
    h = 1e-6
    fd = (numbaot.discounted_cumsum_right(rewards, GAMMA + h, dones).sum()
          - numbaot.discounted_cumsum_right(rewards, GAMMA - h, dones).sum()) / (2 * h)
    print(f"d sum(G) / d gamma = {float(gg):.6g} (central difference {fd:.6g}); "
          f"d sum(G) / d r_0 = {gi[0, 0]:.4f} (= 1)")

    _plot(rewards, dones, G_mc, V, advs)


def _plot(rewards, dones, G_mc, V, advs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env = 0
    n = min(400, rewards.shape[1])
    t = np.arange(n)
    fig, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    ax = axes[0]
    ax.plot(t, G_mc[env, :n], label="Monte-Carlo return $G_t$ (numbaot)")
    ax.plot(t, V[env, :n], label="fitted critic $V(s_t)$", alpha=0.8)
    for k in np.flatnonzero(dones[env, :n]):
        ax.axvline(k, color="grey", lw=0.6, ls=":")
    ax.set_ylabel("discounted return ($\\gamma$ = %.2f)" % GAMMA)
    ax.set_title("CartPole, environment %d: episode ends (dotted), returns and values" % env)
    ax.legend(loc="upper right")
    ax = axes[1]
    for lam, adv in advs.items():
        ax.plot(t, adv[env, :n], label=f"GAE $\\lambda$ = {lam}", lw=1)
    for k in np.flatnonzero(dones[env, :n]):
        ax.axvline(k, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("step")
    ax.set_ylabel("advantage $A_t$")
    ax.legend(loc="lower left", ncol=4)
    fig.tight_layout()
    out = os.path.join(os.getcwd(), "returns_gae.png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
