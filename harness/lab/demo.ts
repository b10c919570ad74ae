/** `switchyard-lab up|down`: the demo cluster, left running until `lab down`. */
import { Lab, defaultSpec } from './lab.js';
import { endpointSlice, exampleObjects, service } from './objects.js';
import { APISERVER_INTERNAL_URL, ControlPlane } from './controlplane.js';
import { Cluster } from './cluster.js';
import { demoWorkload } from './workload.js';

export const DEMO_API_PORTS: Record<string, number> = { n1: 19101, n2: 19102 };
/** Root-namespace relay ports of the API-server lab: admin (users, kubectl), agents. */
export const DEMO_APISERVER_PORTS = { admin: 19110, agent: 19111 };

export async function labUp(prefix: string, o: { apiserver?: boolean; cluster?: boolean } = {}): Promise<number> {
  if (o.cluster) return clusterUp(prefix);
  const lab = new Lab(defaultSpec(prefix));
  let cp: ControlPlane | undefined;
  try {
    lab.up();
    const objects = [
      ...exampleObjects(lab),
      // North-south: a NodePort Service for the external client.
      service('web-np', { type: 'NodePort', clusterIPs: ['10.96.0.80'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }] }),
      endpointSlice(lab, 'web-np', ['web-0', 'web-1', 'web-2'], [{ name: 'http', port: 8080 }]),
    ];
    if (o.apiserver) {
      cp = new ControlPlane(lab, { adminPort: DEMO_APISERVER_PORTS.admin, agentPort: DEMO_APISERVER_PORTS.agent });
      await cp.up();
      const created = await cp.apply(objects);
      // Agents in their node's namespace reach the API server directly on the fabric, as a
      // kube-proxy-free node would: not through the kubernetes Service they program themselves.
      const source = ['--source', 'kube', '--apiserver', APISERVER_INTERNAL_URL, '--token-file', cp.agentTokenFile, '--ca-file', cp.caCert];
      for (const n of lab.spec.nodes) await lab.startAgent(n.name, DEMO_API_PORTS[n.name] ?? 19100 + n.index, [], { netns: true, source });
      const rv = (kind: string) => created.filter((x) => x.kind === kind).map((x) => x.metadata?.resourceVersion ?? '0').reduce((a, b) => (BigInt(a) > BigInt(b) ? a : b), '0');
      await cp.waitApplied({ services: rv('Service'), endpointslices: rv('EndpointSlice') }, 20_000);
    } else {
      const version = lab.writeObjects(objects);
      // Agents in their node's network namespace, as on a real node: socket hooks and the tc path.
      for (const n of lab.spec.nodes) await lab.startAgent(n.name, DEMO_API_PORTS[n.name] ?? 19100 + n.index, [], { netns: true });
      await lab.waitApplied(version);
    }
  } catch (e) {
    await lab.down();
    throw e;
  }
  console.log(`lab "${prefix}" is up: nodes ${lab.spec.nodes.map((n) => n.name).join(', ')}; pods ${lab.spec.pods.map((p) => p.name).join(', ')}`);
  if (cp) {
    console.log(`API server: ${cp.adminUrl} (admin kubeconfig ${cp.adminKubeconfig}; in the lab's namespaces ${APISERVER_INTERNAL_URL})`);
    console.log(`agents: --apiserver ${APISERVER_INTERNAL_URL} with the token of ServiceAccount kube-system/switchyard (ClusterRole of deploy/base/rbac.yaml)`);
    console.log(`edit objects with any client, e.g. KUBECONFIG=${cp.adminKubeconfig} kubectl get svc,endpointslices -A`);
  } else {
    console.log(`objects: ${lab.objectsDir()}/lab.yaml (edit it: the agents apply changes within a second)`);
  }
  for (const n of lab.spec.nodes) console.log(`agent ${n.name}: API on ${lab.state.agents[n.name].apiSocket}  (log ${lab.state.stateDir}/agent-${n.name}.log)`);

  console.log('\nClusterIP 10.96.0.10:80 from client-n1, 300 connections:');
  const tcp = await lab.client('client-n1', ['tcp', '10.96.0.10', 80, 300]);
  printSpread(tcp.counts, 300);
  console.log(`  getpeername on the client showed: ${tcp.peers.join(', ')}`);
  console.log(`  backends saw the client as: ${tcp.saw.join(', ')}`);
  console.log('\nUDP 10.96.0.10:53 (unconnected sendto) from client-n2, 100 datagrams:');
  const udp = await lab.client('client-n2', ['udp-unconnected', '10.96.0.10', 53, 100]);
  printSpread(udp.counts, 100);
  console.log(`  replies came from: ${udp.replyFrom.join(', ')}`);
  console.log('\nIPv6 ClusterIP [fd10:96::10]:80 from client-n2, 100 connections:');
  printSpread((await lab.client('client-n2', ['tcp', 'fd10:96::10', 80, 100])).counts, 100);
  const refused = await lab.client('client-n1', ['refused', '10.96.0.20', 80]);
  console.log(`\nService without endpoints 10.96.0.20:80: ${refused.code} after ${refused.ms.toFixed(2)} ms`);
  console.log('\nNodePort 10.0.0.11:30080 and 10.0.0.12:30080 from the external client (10.0.0.100), 150 connections each:');
  for (const node of ['10.0.0.11', '10.0.0.12']) {
    const np = await lab.external(['tcp', node, 30080, 150]);
    console.log(`  via ${node}:`);
    printSpread(np.counts, 150);
    console.log(`  backends saw the client as: ${np.saw.join(', ')} (the client itself for local backends, the node for remote ones: masqueraded)`);
  }
  console.log(`\nInspect: switchyard maps services --api-socket ${lab.state.agents.n1.apiSocket}`);
  console.log(`         switchyard maps flows --api-socket ${lab.state.agents.n1.apiSocket}`);
  console.log(`Remove:  switchyard-lab down${prefix === 'sylab' ? '' : ` --prefix ${prefix}`}`);
  return 0;
}

function printSpread(counts: Record<string, number>, total: number): void {
  for (const [pod, n] of Object.entries(counts).sort()) {
    console.log(`  ${pod.padEnd(8)} ${String(n).padStart(5)}  ${'#'.repeat(Math.round((n / total) * 60))}`);
  }
}

export async function labDown(prefix: string): Promise<number> {
  const removed = Lab.down(prefix);
  console.log(removed.length ? `lab "${prefix}" removed (${removed.length} objects)` : `no lab "${prefix}" to remove`);
  return 0;
}

/**
 * `switchyard-lab up --cluster`: the kubelet cluster with no kube-proxy,
 * switchyard installed from deploy/ as a DaemonSet, CoreDNS, and a demo
 * workload; then what a person checks first, from a pod and from outside.
 */
async function clusterUp(prefix: string): Promise<number> {
  const cluster = new Cluster({ prefix, adminPort: DEMO_APISERVER_PORTS.admin, agentPort: DEMO_APISERVER_PORTS.agent });
  await cluster.up();
  try {
    const dsMs = await cluster.deploySwitchyard();
    console.error(`cluster: switchyard DaemonSet Ready on both nodes in ${(dsMs / 1000).toFixed(1)} s`);
    await cluster.waitNodesReady(cluster.nodes.length);
    cluster.kubectl(['apply', '-f', '-'], { input: demoWorkload() });
    await cluster.waitDeployment('kube-system', 'coredns');
    await cluster.waitDeployment('default', 'web');
    await cluster.waitDeployment('default', 'client');
  } catch (e) {
    await cluster.down();
    throw e;
  }
  const t = cluster.timings;
  console.log(`cluster "${prefix}" is up in ${((t.total ?? 0) / 1000).toFixed(0)} s: nodes n1, n2 (kubelet + containerd), no kube-proxy; switchyard as a DaemonSet`);
  console.log(`kubectl: KUBECONFIG=${cluster.cp.adminKubeconfig} ${cluster.cp.bins.kubectl} get pods -A -o wide`);
  console.log(cluster.kubectl(['get', 'pods', '-A', '-o', 'wide']));
  const client = cluster.kubectlJson<any>(['get', 'pods', '-l', 'app=client']).items[0].metadata.name;
  const show = (title: string, cmd: string[]) => {
    console.log(`$ kubectl exec ${client} -- ${cmd.join(' ')}    # ${title}`);
    try {
      console.log(cluster.exec('default', client, cmd).trimEnd());
    } catch (e) {
      console.log(`  failed: ${(e as Error).message}`);
    }
  };
  show('cluster DNS through switchyard', ['nslookup', 'web.default.svc.cluster.local']);
  show('ClusterIP by name', ['curl', '-sS', '-m', '5', 'http://web.default/hostname']);
  show('the kubernetes Service', ['curl', '-sS', '-m', '5', '-k', '-o', '/dev/null', '-w', '%{http_code}\\n', 'https://kubernetes.default/version']);
  console.log('\nNodePort 30080 from the external client (10.0.0.100):');
  for (const node of ['10.0.0.11', '10.0.0.12']) {
    const r = await cluster.lab.external(['http-count', node, 30080, 20, '/hostname']).catch((e: Error) => ({ error: e.message }));
    console.log(`  via ${node}: ${JSON.stringify(r)}`);
  }
  console.log(`\nInspect a node: ${cluster.cp.bins.kubectl} --kubeconfig ${cluster.cp.adminKubeconfig} -n kube-system exec ds/switchyard -- node /opt/switchyard/bin/switchyard.js maps services`);
  console.log(`Remove:  switchyard-lab down${prefix === 'sylab' ? '' : ` --prefix ${prefix}`}`);
  return 0;
}
