import type {
  AnnotateOperation,
  JobInstrumentation,
  JobOperation,
  JobOperationAttributes,
} from '../interfaces/job-instrumentation.interface.js';

const ignoreAnnotation: AnnotateOperation = () => undefined;

/** Runs the library's operations through the instrumentation installed (tracing), or directly when there is none. */
export class OperationTracer {
  private instrumentation: JobInstrumentation | undefined;

  /** Installs the instrumentation (once, at module init, by the tracing provider). */
  install(instrumentation: JobInstrumentation): void {
    this.instrumentation = instrumentation;
  }

  /** Whether an instrumentation is installed. */
  get active(): boolean {
    return this.instrumentation !== undefined;
  }

  run<T>(
    operation: JobOperation,
    attributes: JobOperationAttributes,
    work: (annotate: AnnotateOperation) => Promise<T>,
  ): Promise<T> {
    return this.instrumentation ? this.instrumentation.run(operation, attributes, work) : work(ignoreAnnotation);
  }
}
