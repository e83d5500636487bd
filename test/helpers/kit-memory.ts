import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/*
 * The memory the kit ships the gateway with, read off its Kubernetes manifests: the V8 heap its
 * NODE_OPTIONS sets, and its container's memory limit. Tests of hostile load run the built
 * gateway under that heap and hold its peak RSS to that limit.
 */

export interface KitMemory {
  name: string;
  heapMb: number;
  limitMib: number;
}

const MANIFESTS = { sidecar: '../../deploy/kubernetes/sidecar/agent.yaml', shared: '../../deploy/kubernetes/shared/gateway.yaml' } as const;

interface Container {
  env?: Array<{ name: string; value?: string }>;
  resources?: { limits?: { memory?: string } };
}

export function kitMemory(kit: keyof typeof MANIFESTS): KitMemory {
  const text = readFileSync(fileURLToPath(new URL(MANIFESTS[kit], import.meta.url)), 'utf8');
  for (const doc of parseAllDocuments(text)) {
    const spec = (doc.toJS() as { spec?: { template?: { spec?: { containers?: Container[]; initContainers?: Container[] } } } })?.spec
      ?.template?.spec;
    for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
      const heap = /--max-old-space-size=(\d+)/.exec(c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '');
      const limit = /^(\d+)(Mi|Gi)$/.exec(c.resources?.limits?.memory ?? '');
      if (heap && limit) return { name: kit, heapMb: Number(heap[1]), limitMib: Number(limit[1]) * (limit[2] === 'Gi' ? 1024 : 1) };
    }
  }
  throw new Error(`no container with a heap and a memory limit in ${MANIFESTS[kit]}`);
}
