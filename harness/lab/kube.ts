/**
 * kubectl against one cluster, and the waits every cluster test needs: the
 * lab cluster (harness/lab/cluster.ts) and kind (harness/kind/kind.ts) both
 * extend it.
 */
import { execFileSync, spawn } from 'node:child_process';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Kube {
  constructor(
    readonly kubectlBin: string,
    readonly kubeconfig: string,
  ) {}

  /** kubectl as the cluster's admin. Throws with stderr on failure. */
  kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): string {
    try {
      return execFileSync(this.kubectlBin, ['--kubeconfig', this.kubeconfig, ...args], {
        encoding: 'utf8',
        input: opts.input,
        timeout: opts.timeoutMs ?? 120_000,
        stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
        maxBuffer: 64 * 1024 * 1024,
      });
    } catch (e) {
      const err = e as { stderr?: string; stdout?: string; message: string };
      throw new Error(`kubectl ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
    }
  }

  kubectlJson<T = any>(args: string[]): T {
    return JSON.parse(this.kubectl([...args, '-o', 'json'])) as T;
  }

  /** Polls `check` (true, or a string saying what is missing) until true or the deadline. */
  async waitFor(what: string, timeoutMs: number, check: () => true | string | Promise<true | string>): Promise<number> {
    const t0 = Date.now();
    let last = '';
    while (Date.now() - t0 < timeoutMs) {
      try {
        const r = await check();
        if (r === true) return Date.now() - t0;
        last = r;
      } catch (e) {
        last = (e as Error).message;
      }
      await sleep(500);
    }
    throw new Error(`${what}: not after ${timeoutMs / 1000} s (${last})`);
  }

  /** Waits until `nodes` nodes report Ready (CNI configured, runtime up). */
  async waitNodesReady(nodes: number, timeoutMs = 120_000): Promise<void> {
    await this.waitFor('nodes Ready', timeoutMs, () => {
      const items = this.kubectlJson<{ items: { metadata: { name: string }; status: { conditions: { type: string; status: string }[] } }[] }>(['get', 'nodes']).items;
      const notReady = items.filter((n) => !n.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True')).map((n) => n.metadata.name);
      return notReady.length === 0 && items.length === nodes ? true : `not Ready: ${notReady.join(', ')} (${items.length} of ${nodes} registered)`;
    });
  }

  /** Waits until a DaemonSet's newest pods are ready on `nodes` nodes. Returns ms. */
  async waitDaemonSetReady(nodes: number, timeoutMs = 180_000, ns = 'kube-system', name = 'switchyard'): Promise<number> {
    return this.waitFor(`DaemonSet ${name} ready on every node`, timeoutMs, () => {
      const ds = this.kubectlJson<any>(['-n', ns, 'get', 'ds', name]);
      const s = ds.status ?? {};
      if (s.observedGeneration === ds.metadata.generation && s.desiredNumberScheduled === nodes && s.updatedNumberScheduled === nodes && s.numberReady === nodes && (s.numberUnavailable ?? 0) === 0) return true;
      return `desired ${s.desiredNumberScheduled} updated ${s.updatedNumberScheduled} ready ${s.numberReady}`;
    });
  }

  /** Waits for a Deployment's replicas to be available. */
  async waitDeployment(ns: string, name: string, timeoutMs = 120_000): Promise<number> {
    return this.waitFor(`deployment ${ns}/${name} available`, timeoutMs, () => {
      const d = this.kubectlJson<any>(['-n', ns, 'get', 'deployment', name]);
      const want = d.spec.replicas ?? 1;
      return d.status?.observedGeneration === d.metadata.generation && d.status?.availableReplicas === want && d.status?.updatedReplicas === want ? true : `available ${d.status?.availableReplicas ?? 0}/${want}`;
    });
  }

  /** Runs a command in a pod's container (kubectl exec); returns stdout. */
  exec(ns: string, pod: string, cmd: string[], timeoutMs = 60_000): string {
    return this.kubectl(['-n', ns, 'exec', pod, '--', ...cmd], { timeoutMs });
  }

  /** Starts a long-running kubectl exec (e.g. a client loop); resolves with its stdout when it ends. */
  execStream(ns: string, pod: string, cmd: string[]): { done: Promise<{ code: number | null; stdout: string; stderr: string }>; kill: () => void } {
    const child = spawn(this.kubectlBin, ['--kubeconfig', this.kubeconfig, '-n', ns, 'exec', pod, '--', ...cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
    return { done, kill: () => child.kill('SIGKILL') };
  }
}
