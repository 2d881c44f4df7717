"""The result columns every table and CSV shares; a module of constants, so the CLI's options load no pandas."""

ACC_COLUMNS = ("acc_all", "acc_many", "acc_medium", "acc_few")  # test accuracy: all classes, many/medium/few-shot
RESULT_COLUMNS = ("method", "dataset", "seed", "epoch", *ACC_COLUMNS)  # the leading columns of results.csv
#: training-label accuracy (pllzoo.metrics.label_accuracy): logged by methods with a label update of their own
LABEL_COLUMNS = ("label_acc", "label_acc_many", "label_acc_medium", "label_acc_few")
#: the trainer's own fields of a record after the accuracies, in results.csv's order (then the training-label
#: accuracies, then what components log, in the order of the run folders that log them: the columns follow from the
#: runs present alone, whatever order they finished in, so a resumed or sharded bench writes what one bench does;
#: read them by name, as a column moves when runs of another method are added)
TRAINER_COLUMNS = ("stage", "stage_index", "epochs", "final_stage", "lr", "loss", "wall_s", "run", *LABEL_COLUMNS)
